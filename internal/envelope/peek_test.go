package envelope

import (
	"errors"
	"testing"

	"filippo.io/age"
)

// FuzzPeekStamp feeds arbitrary prefixes to PeekStamp: it must not panic,
// must fail with ErrTruncated or ErrNotEnvelope, and whenever the bytes
// also parse as a whole object, must agree with the full parser's stamp.
// Seeds: the first bytes of real sealed objects, cut at every length
// around the fixed header.
func FuzzPeekStamp(f *testing.F) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		f.Fatal(err)
	}
	e, err := New([]age.Identity{id}, nil, Options{StoreID: NewStoreID()})
	if err != nil {
		f.Fatal(err)
	}
	sealed, err := e.SealStamped("app/x", []byte("value"), Stamp{Generation: 3, Epoch: 7, Sequence: 42}, Writer{Instance: "pod-a"})
	if err != nil {
		f.Fatal(err)
	}
	for _, n := range []int{0, 3, 7, 8, FixedHeaderLen - 1, FixedHeaderLen, FixedHeaderLen + 1, len(sealed)} {
		f.Add(sealed[:n])
	}
	f.Add([]byte("age-encryption.org/v1\n"))
	f.Fuzz(func(t *testing.T, prefix []byte) {
		st, err := PeekStamp("x", prefix)
		if err != nil {
			if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrNotEnvelope) {
				t.Fatalf("PeekStamp error without a sentinel: %v", err)
			}
			if len(prefix) >= FixedHeaderLen {
				if _, perr := parseHeader("x", prefix); perr == nil {
					t.Fatalf("PeekStamp refused a header the full parser accepts: %v", err)
				}
			}
			return
		}
		if len(prefix) < FixedHeaderLen {
			t.Fatalf("PeekStamp accepted %d bytes, fewer than the fixed header", len(prefix))
		}
		if hdr, perr := parseHeader("x", prefix); perr == nil && hdr.stamp != st {
			t.Fatalf("PeekStamp = %+v, the full parser = %+v", st, hdr.stamp)
		}
	})
}

// PeekStamp reads the stamp the sealer wrote from the fixed header alone.
func TestPeekStamp_FixedHeaderOnly(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	e, err := New([]age.Identity{id}, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := Stamp{Generation: 2, Epoch: 9, Sequence: 1 << 40}
	sealed, err := e.SealStamped("n", []byte("v"), want, Writer{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := PeekStamp("n", sealed[:FixedHeaderLen])
	if err != nil || got != want {
		t.Fatalf("PeekStamp = %+v, %v; want %+v", got, err, want)
	}
	if _, err := PeekStamp("n", sealed[:FixedHeaderLen-1]); !errors.Is(err, ErrTruncated) {
		t.Fatalf("one byte short: %v, want ErrTruncated", err)
	}
}
