package envelope

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"filippo.io/age"
)

// writerEnvelopes are a writer alone (objects not content-bound) and a
// writer with a recovery recipient (content-bound objects), bound to a
// store, with the recovery identity for the second.
func writerEnvelopes(t *testing.T) (alone, bound, recovery *Envelope) {
	t.Helper()
	w, rec := newX25519(t), newX25519(t)
	sid := NewStoreID()
	alone = mustNew(t, []age.Identity{w}, nil, Options{StoreID: sid})
	bound = mustNew(t, []age.Identity{w}, []age.Recipient{rec.Recipient()}, Options{StoreID: sid})
	recovery = mustNew(t, nil, nil, Options{StoreID: sid, Recovery: []age.Identity{rec}, Logger: slog.New(slog.DiscardHandler)})
	return alone, bound, recovery
}

var testWriter = Writer{Instance: "pod-7f3a-instance", Hostname: "node-secret-hostname", PID: 48213}

// The writer sealed into an object comes back from every way of opening
// it — Open, OpenReaderAt, a stream sealed by SealTo, the header alone —
// whether the object is content-bound or not.
func TestWriter_RoundTripsThroughEveryOpen(t *testing.T) {
	alone, bound, _ := writerEnvelopes(t)
	stamp := Stamp{Generation: 2, Epoch: 9, Sequence: 77}
	for kind, e := range map[string]*Envelope{"writer alone": alone, "content-bound": bound} {
		sealed, err := e.SealStamped("app/key", []byte("value"), stamp, testWriter)
		if err != nil {
			t.Fatal(err)
		}
		_, info, err := e.OpenWithInfo("app/key", sealed)
		if err != nil || info.Writer != testWriter || info.Stamp != stamp {
			t.Fatalf("%s: OpenWithInfo = %+v, %v; want writer %+v", kind, info, err, testWriter)
		}
		_, rinfo, err := e.OpenReaderAt("app/key", bytes.NewReader(sealed), int64(len(sealed)))
		if err != nil || rinfo != info {
			t.Fatalf("%s: OpenReaderAt = %+v, %v; want %+v", kind, rinfo, err, info)
		}
		streamed := fileBytes(t, sealToFileWith(t, e, "app/key", []byte("value"), stamp, testWriter))
		if _, sinfo, err := e.OpenWithInfo("app/key", streamed); err != nil || sinfo.Writer != testWriter {
			t.Fatalf("%s: a streamed object opens with %+v, %v", kind, sinfo.Writer, err)
		}
		n, _, err := HeaderLen("app/key", sealed[:FixedHeaderLen])
		if err != nil {
			t.Fatal(err)
		}
		hinfo, err := e.OpenHeader("app/key", sealed[:n], int64(len(sealed)))
		if err != nil || hinfo != info {
			t.Fatalf("%s: OpenHeader of the %d header bytes = %+v, %v; want %+v", kind, n, hinfo, err, info)
		}
	}
}

// A write without a writer (an unfenced write: the lock's records, the
// manifest) opens with a zero Writer.
func TestWriter_NoneSealed_OpensZero(t *testing.T) {
	alone, _, _ := writerEnvelopes(t)
	sealed := mustSeal(t, alone, "app/key", []byte("v"))
	_, info, err := alone.OpenWithInfo("app/key", sealed)
	if err != nil || info.Writer != (Writer{}) {
		t.Fatalf("Opened.Writer = %+v, %v; want zero", info.Writer, err)
	}
}

// The storage operator reads neither the instance nor the host of the
// writer: they are encrypted, and every object's writer field has the
// same length whatever it holds.
func TestWriter_EncryptedAndOfOneLength(t *testing.T) {
	alone, bound, _ := writerEnvelopes(t)
	for _, e := range []*Envelope{alone, bound} {
		sealed, err := e.SealStamped("app/key", []byte("value"), Stamp{}, testWriter)
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{testWriter.Instance, testWriter.Hostname, "pod-7f3a", "secret-host"} {
			if bytes.Contains(sealed, []byte(secret)) {
				t.Errorf("the sealed bytes contain %q", secret)
			}
		}
		short, err := e.SealStamped("app/key", []byte("value"), Stamp{}, Writer{Instance: "a"})
		if err != nil {
			t.Fatal(err)
		}
		none := mustSeal(t, e, "app/key", []byte("value"))
		if len(short) != len(sealed) || len(none) != len(sealed) {
			t.Errorf("sealed sizes %d (long writer), %d (short), %d (none): the writer's length shows", len(sealed), len(short), len(none))
		}
	}
}

// Any change to the writer field is tampering, whoever opens it and
// however: a writer's stanza covers it, the header MAC covers it, and its
// own AEAD tag does.
func TestWriter_TamperedField_FailsToOpen(t *testing.T) {
	alone, bound, recovery := writerEnvelopes(t)
	for kind, c := range map[string]struct{ seal, open *Envelope }{
		"writer alone":      {alone, alone},
		"content-bound":     {bound, bound},
		"recovery identity": {bound, recovery},
	} {
		sealed, err := c.seal.SealStamped("app/key", []byte("value"), Stamp{Epoch: 1, Sequence: 1}, testWriter)
		if err != nil {
			t.Fatal(err)
		}
		for _, off := range []int{offWriter, offWriter + 1, offWriter + writerSealedLen/2, offWriter + writerSealedLen - 1} {
			bad := bytes.Clone(sealed)
			bad[off] ^= 0x01
			if _, err := c.open.Open("app/key", bad); !errors.Is(err, ErrTampered) {
				t.Errorf("%s: byte %d of the writer field flipped: Open = %v, want ErrTampered", kind, off-offWriter, err)
			}
			if _, _, err := c.open.OpenReaderAt("app/key", bytes.NewReader(bad), int64(len(bad))); !errors.Is(err, ErrTampered) {
				t.Errorf("%s: byte %d of the writer field flipped: OpenReaderAt = %v, want ErrTampered", kind, off-offWriter, err)
			}
			if _, err := c.open.OpenHeader("app/key", bad, int64(len(bad))); !errors.Is(err, ErrTampered) {
				t.Errorf("%s: byte %d of the writer field flipped: OpenHeader = %v, want ErrTampered", kind, off-offWriter, err)
			}
		}
	}
}

// The writer field of one object does not open in another: its key is
// the object's own.
func TestWriter_SplicedFromAnotherObject_Tampered(t *testing.T) {
	alone, _, _ := writerEnvelopes(t)
	a, err := alone.SealStamped("app/key", []byte("value"), Stamp{}, testWriter)
	if err != nil {
		t.Fatal(err)
	}
	b, err := alone.SealStamped("app/key", []byte("value"), Stamp{}, Writer{Instance: "other"})
	if err != nil {
		t.Fatal(err)
	}
	copy(b[offWriter:offWriter+writerSealedLen], a[offWriter:offWriter+writerSealedLen])
	if _, err := alone.Open("app/key", b); !errors.Is(err, ErrTampered) {
		t.Fatalf("Open of an object with another's writer field = %v, want ErrTampered", err)
	}
}

// OpenHeader authenticates what the header says from the header alone:
// a change anywhere in it fails, the payload is not read, and its errors
// are Open's.
func TestOpenHeader_HeaderOnly_AuthenticatedWithOpensErrors(t *testing.T) {
	alone, bound, recovery := writerEnvelopes(t)
	for kind, e := range map[string]*Envelope{"writer alone": alone, "content-bound": bound} {
		sealed, err := e.SealStamped("app/key", []byte("value"), Stamp{Epoch: 3, Sequence: 4}, testWriter)
		if err != nil {
			t.Fatal(err)
		}
		n, _, err := HeaderLen("app/key", sealed)
		if err != nil {
			t.Fatal(err)
		}
		head := sealed[:n]
		// Without the age header, a header whose stanza is gone (its count
		// or key id changed) cannot be told from one sealed to other keys:
		// no matching identity. Never a success.
		for i := range head {
			bad := bytes.Clone(head)
			bad[i] ^= 0x01
			if _, err := e.OpenHeader("app/key", bad, int64(len(sealed))); !isDetected(err) && !errors.Is(err, ErrForeignStore) && !errors.Is(err, ErrNoMatchingIdentity) {
				t.Fatalf("%s: header byte %d flipped: OpenHeader = %v", kind, i, err)
			}
		}
		if _, err := e.OpenHeader("app/key", head[:n-1], int64(len(sealed))); !errors.Is(err, ErrTruncated) {
			t.Errorf("%s: one byte short of the header: %v, want ErrTruncated", kind, err)
		}
		if _, err := e.OpenHeader("app/other", head, int64(len(sealed))); !errors.Is(err, ErrNameMismatch) {
			t.Errorf("%s: as another name: %v, want ErrNameMismatch", kind, err)
		}
		other := mustNew(t, []age.Identity{newX25519(t)}, nil, Options{StoreID: alone.StoreID()})
		if _, err := other.OpenHeader("app/key", head, int64(len(sealed))); !errors.Is(err, ErrNoMatchingIdentity) && !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("%s: another key: %v, want no matching identity", kind, err)
		}
		foreign := mustNew(t, []age.Identity{newX25519(t)}, nil, Options{StoreID: NewStoreID()})
		if _, err := foreign.OpenHeader("app/key", head, int64(len(sealed))); !errors.Is(err, ErrForeignStore) {
			t.Errorf("%s: another store: %v, want ErrForeignStore", kind, err)
		}
		// A payload changed after the header is not the header's business.
		changed := bytes.Clone(sealed)
		changed[len(changed)-1] ^= 0x01
		if info, err := e.OpenHeader("app/key", changed, int64(len(changed))); err != nil || info.Writer != testWriter {
			t.Errorf("%s: OpenHeader of an object whose last byte changed = %+v, %v; want its header's writer", kind, info.Writer, err)
		}
	}
	// A recovery identity reads the header through the age header, which
	// must then be there too; the writer it reads is unauthenticated.
	sealed, err := bound.SealStamped("app/key", []byte("value"), Stamp{}, testWriter)
	if err != nil {
		t.Fatal(err)
	}
	n, _, _ := HeaderLen("app/key", sealed)
	if _, err := recovery.OpenHeader("app/key", sealed[:n], int64(len(sealed))); !errors.Is(err, ErrTruncated) {
		t.Errorf("recovery identity, the envelope header only: %v, want ErrTruncated (it needs the age header)", err)
	}
	info, err := recovery.OpenHeader("app/key", sealed, int64(len(sealed)))
	if err != nil || info.Writer != testWriter || !info.Unauthenticated {
		t.Errorf("recovery identity, the whole object: %+v, %v", info, err)
	}
}

// HeaderLen says how many bytes an object's header takes from the fixed
// part alone, and fails as PeekStamp does on what is not a header.
func TestHeaderLen_FromTheFixedPart(t *testing.T) {
	alone, bound, _ := writerEnvelopes(t)
	for _, e := range []*Envelope{alone, bound} {
		sealed := mustSeal(t, e, "a/name", []byte("v"))
		hdr, err := parseHeader("a/name", sealed)
		if err != nil {
			t.Fatal(err)
		}
		if n, _, err := HeaderLen("a/name", sealed[:FixedHeaderLen]); err != nil || int64(n) != hdr.ageOff {
			t.Errorf("HeaderLen = %d, %v; want %d", n, err, hdr.ageOff)
		}
	}
	if _, _, err := HeaderLen("x", []byte("CAIRNST")); !errors.Is(err, ErrTruncated) {
		t.Errorf("HeaderLen of the magic alone = %v, want ErrTruncated", err)
	}
	if _, _, err := HeaderLen("x", bytes.Repeat([]byte("x"), FixedHeaderLen)); !errors.Is(err, ErrNotEnvelope) {
		t.Errorf("HeaderLen of junk = %v, want ErrNotEnvelope", err)
	}
}

// A writer whose names do not fit the field is refused, not cut: the
// store cuts them where it must (it knows which part matters).
func TestWriter_TooLong_Refused(t *testing.T) {
	alone, _, _ := writerEnvelopes(t)
	long := Writer{Instance: strings.Repeat("i", MaxWriterLen-9), Hostname: strings.Repeat("h", 10)}
	if _, err := alone.SealStamped("n", nil, Stamp{}, long); !errors.Is(err, ErrInvalidName) {
		t.Errorf("a writer of %d bytes: %v, want ErrInvalidName", MaxWriterLen+1, err)
	}
	fits := Writer{Instance: strings.Repeat("i", MaxWriterLen-10), Hostname: strings.Repeat("h", 10), PID: 1<<32 - 1}
	sealed, err := alone.SealStamped("n", nil, Stamp{}, fits)
	if err != nil {
		t.Fatal(err)
	}
	if _, info, err := alone.OpenWithInfo("n", sealed); err != nil || info.Writer != fits {
		t.Errorf("a writer of exactly %d bytes: %+v, %v", MaxWriterLen, info.Writer, err)
	}
	if _, err := alone.SealStamped("n", nil, Stamp{}, Writer{Instance: "i", PID: -1}); !errors.Is(err, ErrInvalidName) {
		t.Errorf("a negative PID: %v, want ErrInvalidName", err)
	}
}
