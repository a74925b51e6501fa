package lock

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// validRecordJSON is a record as this version writes it.
func validRecordJSON(t testing.TB) []byte {
	t.Helper()
	now := time.Date(2026, 11, 30, 4, 0, 0, 123456789, time.UTC)
	data, err := Record{
		InstanceID: "pod-a", Hostname: "host-a", PID: 4242, ProcessStart: now.Add(-time.Hour),
		ProcessScope: "boot/pid:[4026531836]", AcquiredAt: now, Heartbeat: now, Epoch: 3,
		Mode: ModeCAS, AcquisitionID: "0b8f2a34-8a55-4c55-9d6b-1d6f4a0c2e11",
	}.encode()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestDecodeRecord_Garbage_IsMalformedNamingWhy(t *testing.T) {
	for _, c := range []struct{ name, data, why string }{
		{"Empty", ``, "unexpected end of JSON input"},
		{"NotJSON", `{not json`, "invalid character"},
		{"Null", `null`, "instance_id or acquisition_id missing"},
		{"Array", `[]`, "cannot unmarshal array"},
		{"NoAcquisitionID", `{"instance_id":"a","epoch":1}`, "instance_id or acquisition_id missing"},
		{"EpochZero", `{"instance_id":"a","acquisition_id":"b","epoch":0}`, "epoch missing or zero"},
		{"EpochMissing", `{"instance_id":"a","acquisition_id":"b"}`, "epoch missing or zero"},
		{"EpochNegative", `{"instance_id":"a","acquisition_id":"b","epoch":-1}`, "cannot unmarshal number -1"},
		{"BadTime", `{"instance_id":"a","acquisition_id":"b","epoch":1,"heartbeat":"yesterday"}`, "cannot parse"},
		{"UnknownState", `{"instance_id":"a","acquisition_id":"b","epoch":1,"state":"maybe"}`, `unknown state "maybe"`},
		{"HeldEpochZero", `{"instance_id":"a","acquisition_id":"b","epoch":0,"state":"held"}`, "epoch missing or zero"},
		{"NegativeWindow", `{"instance_id":"a","acquisition_id":"b","epoch":1,"stale_after_ns":-5}`, "negative stale window"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := decodeRecord([]byte(c.data))
			if !errors.Is(err, errMalformed) || !strings.HasPrefix(err.Error(), "not a lock record: ") || !strings.Contains(err.Error(), c.why) {
				t.Fatalf("decodeRecord(%q) = %v, want errMalformed saying %q", c.data, err, c.why)
			}
		})
	}
	if r, err := decodeRecord(validRecordJSON(t)); err != nil || r.InstanceID != "pod-a" || r.Epoch != 3 {
		t.Fatalf("a valid record = %+v, %v", r, err)
	}
}

// FuzzDecodeRecord feeds arbitrary bytes, as an opened lock object could
// hold, to the one parser that Acquire, Inspect, Break, the heartbeat and
// Release all use (through observe). It must never panic; garbage must be
// an error matching errMalformed (which observe reports as an unreadable
// lock, taken over with a warning); and what it accepts must be a record
// the lock can act on and write back unchanged.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(validRecordJSON(f))
	for _, s := range []string{
		``, `null`, `{}`, `[]`, `"x"`, `{not json`, `{"instance_id":"a","acquisition_id":"b","epoch":1}`,
		`{"instance_id":"a","acquisition_id":"b","epoch":0}`, `{"instance_id":"a","acquisition_id":"b","epoch":-1}`,
		`{"instance_id":"a","acquisition_id":"b","epoch":18446744073709551616}`,
		`{"instance_id":"a","acquisition_id":"b","epoch":1,"pid":-1,"heartbeat":"0000-01-01T00:00:00Z"}`,
		`{"instance_id":"a","acquisition_id":"b","epoch":1,"acquired_at":"9999-12-31T23:59:59.999999999+23:59"}`,
		`{"instance_id":"a","acquisition_id":"b","epoch":1,"mode":"something new","unknown":[1,{}]}`,
		`{"INSTANCE_ID":"a","Acquisition_Id":"b","EPOCH":1}`,
		`{"instance_id":"a","instance_id":"","acquisition_id":"b","epoch":1}`,
		"{\"instance_id\":\"\xff\",\"acquisition_id\":\"b\",\"epoch\":1}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := decodeRecord(data)
		if err != nil {
			if !errors.Is(err, errMalformed) || !strings.HasPrefix(err.Error(), "not a lock record: ") {
				t.Fatalf("decodeRecord(%q) = %v: not an errMalformed naming the problem", data, err)
			}
			if r != (Record{}) {
				t.Fatalf("decodeRecord(%q) failed but returned a record %+v", data, r)
			}
			return
		}
		if r.InstanceID == "" || r.AcquisitionID == "" || (r.State != stateIntent && r.Epoch == 0) || r.StaleAfter < 0 || r.HeartbeatInterval < 0 {
			t.Fatalf("decodeRecord(%q) accepted a record the lock cannot act on: %+v", data, r)
		}
		// What was accepted survives the lock writing it back (a heartbeat
		// re-encodes the record it holds).
		enc, err := r.encode()
		if err != nil {
			t.Fatalf("accepted record %+v does not encode: %v", r, err)
		}
		r2, err := decodeRecord(enc)
		if err != nil {
			t.Fatalf("re-encoded record %q does not decode: %v", enc, err)
		}
		enc2, err := r2.encode()
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("record changed across encode/decode: %q → %q (%v)", enc, enc2, err)
		}
	})
}

func TestDecodeRecord_IntentMayHaveEpochZero(t *testing.T) {
	r, err := decodeRecord([]byte(`{"instance_id":"a","acquisition_id":"b","epoch":0,"state":"intent"}`))
	if err != nil || r.held() {
		t.Fatalf("an intent = %+v, %v", r, err)
	}
}

// FuzzParseName feeds arbitrary names, as a listing of the lock's prefix
// could hold (anyone with write access can put objects there), to the
// parser that classifies them. It must never panic; what it accepts as the
// lock's own must be exactly what the lock writes (so a name round-trips
// through its formatter), and nothing else may be trusted as a claim or a
// marker.
func FuzzParseName(f *testing.F) {
	acq := "0b8f2a34-8a55-4c55-9d6b-1d6f4a0c2e11"
	for _, s := range []string{
		lockName, ".lock-epoch", intentName(acq), heldName(acq), markerName(1), markerName(math.MaxUint64),
		".lock.d/", ".lock.d/epoch-", ".lock.d/epoch-00000000000000000000", ".lock.d/epoch-18446744073709551616",
		".lock.d/epoch-+0000000000000000001", ".lock.d/epoch-0000000000000000001", ".lock.d/claim--1-intent",
		".lock.d/claim-" + strings.ToUpper(acq) + "-2-held", ".lock.d/claim-" + acq + "-2-held/x", ".locksmith", ".lock.dx/y",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		k, a, epoch := parseName(name)
		switch k {
		case kindLock:
			if name != lockName {
				t.Fatalf("%q parsed as the lock object", name)
			}
		case kindIntent:
			if intentName(a) != name || !validAcquisitionID(a) {
				t.Fatalf("%q parsed as the intent of %q", name, a)
			}
		case kindHeld:
			if heldName(a) != name || !validAcquisitionID(a) {
				t.Fatalf("%q parsed as the held claim of %q", name, a)
			}
		case kindMarker:
			if markerName(epoch) != name || epoch == 0 {
				t.Fatalf("%q parsed as marker %d", name, epoch)
			}
		case kindUnknown:
			if !strings.HasPrefix(name, dirName) {
				t.Fatalf("%q outside %s parsed as an unknown lock object", name, dirName)
			}
		case kindOther:
			if strings.HasPrefix(name, dirName) || name == lockName {
				t.Fatalf("%q parsed as not the lock's", name)
			}
		}
	})
}
