package envelope

import (
	"bytes"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"

	"filippo.io/age"
)

var sentinels = []error{ErrTooLarge, ErrNotEnvelope, ErrTruncated, ErrTampered, ErrNoIdentity, ErrNameMismatch}

// FuzzOpen feeds hostile objects to Open: it must not panic, every failure
// must carry one of the package's sentinel errors, and a success must be
// for the name asked.
func FuzzOpen(f *testing.F) {
	paths, err := filepath.Glob("testdata/vectors/*")
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range paths {
		v := parseVector(&testing.T{}, p)
		f.Add(v.name, v.object)
	}
	var ids []age.Identity
	for _, k := range []string{"alice.txt", "bob.txt"} {
		got, err := LoadIdentityFile(filepath.Join("testdata/keys", k))
		if err != nil {
			f.Fatal(err)
		}
		ids = append(ids, got...)
	}
	strict, err := New(ids, nil)
	if err != nil {
		f.Fatal(err)
	}
	lenient, err := New(ids, nil, AllowUnauthenticated(), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, name string, object []byte) {
		for _, e := range []*Envelope{strict, lenient} {
			pt, err := e.Open(name, object)
			if err != nil {
				typed := false
				for _, s := range sentinels {
					typed = typed || errors.Is(err, s)
				}
				if !typed {
					t.Fatalf("untyped error: %v", err)
				}
				continue
			}
			hdr, perr := parseHeader(name, object)
			if perr != nil || hdr.name != name {
				t.Fatalf("opened an object whose header does not parse or names another object (%v)", perr)
			}
			if len(pt) >= len(object) {
				t.Fatalf("plaintext of %d bytes from an object of %d", len(pt), len(object))
			}
		}
	})
}

// FuzzSealOpen checks that whatever is sealed opens back, under its name
// only.
func FuzzSealOpen(f *testing.F) {
	f.Add("apps/one/state.json", []byte(`{"a":1}`))
	f.Add("x", []byte{})
	f.Add("ünïcode/名前", bytes.Repeat([]byte{0}, 70000))
	ids, err := LoadIdentityFile("testdata/keys/alice.txt")
	if err != nil {
		f.Fatal(err)
	}
	e, err := New(ids, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, name string, pt []byte) {
		sealed, err := e.Seal(name, pt)
		if name == "" || len(name) > MaxNameLen {
			if !errors.Is(err, ErrInvalidName) {
				t.Fatalf("Seal(%q): got %v, want ErrInvalidName", name, err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.Open(name, sealed)
		if err != nil || !bytes.Equal(got, pt) {
			t.Fatalf("round trip: %v", err)
		}
		if _, err := e.Open(name+"x", sealed); !errors.Is(err, ErrNameMismatch) {
			t.Fatalf("Open under another name: got %v, want ErrNameMismatch", err)
		}
	})
}
