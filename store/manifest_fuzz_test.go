package store

import (
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/cairnhq/state/internal/storemeta"
)

func testManifest(t testing.TB) storemeta.Manifest {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 30, 4, 18, 28, 0, time.UTC)
	return storemeta.Manifest{ID: newStoreID(now), Created: now, Recipients: []string{id.Recipient().String()}, Generation: 3,
		LockMode: storemeta.LockModeClaims, Storage: "conditional-write probe: PutObject with If-None-Match: * on an existing object was carried out (header ignored)",
		MigrationLog: true}
}

func TestManifest_RoundTrip(t *testing.T) {
	m := testManifest(t)
	data, err := encodeManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeManifest(data)
	if err != nil || !got.Equal(m) {
		t.Fatalf("decode(encode(m)) = %+v, %v; want %+v", got, err, m)
	}
	if created, ok := storeIDTime(m.ID); !ok || !created.Equal(m.Created) {
		t.Errorf("StoreIDTime = %v, %v; want %v", created, ok, m.Created)
	}
	if !strings.Contains(string(data), `"cairn_state_store":1`) {
		t.Errorf("record %s has no version field", data)
	}
}

func TestManifest_Invalid_Refused(t *testing.T) {
	for name, edit := range map[string]func(*storemeta.Manifest){
		"zero id":          func(m *storemeta.Manifest) { m.ID = [16]byte{} },
		"no lock mode":     func(m *storemeta.Manifest) { m.LockMode = "" },
		"bad lock mode":    func(m *storemeta.Manifest) { m.LockMode = "cas" },
		"storage too long": func(m *storemeta.Manifest) { m.Storage = strings.Repeat("x", 2000) },
		"no time":          func(m *storemeta.Manifest) { m.Created = time.Time{} },
		"generation 0":     func(m *storemeta.Manifest) { m.Generation = 0 },
		"no recipient":     func(m *storemeta.Manifest) { m.Recipients = nil },
		"unsorted":         func(m *storemeta.Manifest) { m.Recipients = append(m.Recipients, "age1aaaa") },
		"bad recipient":    func(m *storemeta.Manifest) { m.Recipients = []string{"age1notarecipient"} },
		"secret as rcpt":   func(m *storemeta.Manifest) { m.Recipients = []string{"AGE-SECRET-KEY-1QQQQ"} },
		"duplicated rcpt":  func(m *storemeta.Manifest) { m.Recipients = append(m.Recipients, m.Recipients[0]) },
	} {
		m := testManifest(t)
		edit(&m)
		if err := m.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s: the error quotes the value: %v", name, err)
		}
	}
}

// FuzzDecodeManifest: decoding never panics; whatever it accepts is valid
// and survives a round trip; its errors never quote the record.
func FuzzDecodeManifest(f *testing.F) {
	m := testManifest(f)
	good, err := encodeManifest(m)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"cairn_state_store":1}`))
	f.Add([]byte(`{"cairn_state_store":1,"id":"00000000000000000000000000000000"}`))
	f.Add([]byte(`{"cairn_state_store":2}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"cairn_state_store":1,"recipients":["AGE-SECRET-KEY-1XYZZYXYZZY"]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodeManifest(data)
		if err != nil {
			if strings.Contains(err.Error(), "XYZZY") {
				t.Fatalf("error quotes the record: %v", err)
			}
			return
		}
		if err := got.Validate(); err != nil {
			t.Fatalf("accepted an invalid manifest: %v", err)
		}
		again, err := encodeManifest(got)
		if err != nil {
			t.Fatal(err)
		}
		back, err := decodeManifest(again)
		if err != nil || !back.Equal(got) {
			t.Fatalf("round trip: %+v, %v", back, err)
		}
	})
}
