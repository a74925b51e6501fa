package envelope

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"filippo.io/age"
)

func newX25519(t testing.TB) *age.X25519Identity {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func mustNew(t testing.TB, ids []age.Identity, rs []age.Recipient, opts ...Option) *Envelope {
	t.Helper()
	e, err := New(ids, rs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func mustSeal(t testing.TB, e *Envelope, name string, pt []byte) []byte {
	t.Helper()
	sealed, err := e.Seal(name, pt)
	if err != nil {
		t.Fatalf("Seal(%q): %v", name, err)
	}
	return sealed
}

func TestSealOpen_X25519_RoundTripsEverySize(t *testing.T) {
	e := mustNew(t, []age.Identity{newX25519(t)}, nil)
	for _, size := range []int{0, 1, 15, 16, 17, 1000, chunkSize - 1, chunkSize, chunkSize + 1, 2 * chunkSize, 3*chunkSize + 7} {
		pt := bytes.Repeat([]byte{byte(size)}, size)
		sealed := mustSeal(t, e, "apps/one/token", pt)
		got, err := e.Open("apps/one/token", sealed)
		if err != nil {
			t.Fatalf("size %d: Open: %v", size, err)
		}
		if !bytes.Equal(got, pt) {
			t.Fatalf("size %d: got %d bytes back, want the %d sealed", size, len(got), len(pt))
		}
	}
}

func TestOpen_ObjectCopiedToAnotherName_FailsWithNameMismatch(t *testing.T) {
	e := mustNew(t, []age.Identity{newX25519(t)}, nil)
	sealed := mustSeal(t, e, "a", []byte("secret"))
	_, err := e.Open("b", sealed)
	if !errors.Is(err, ErrNameMismatch) {
		t.Fatalf("Open under another name: got %v, want ErrNameMismatch", err)
	}
	if !strings.Contains(err.Error(), `"a"`) || !strings.Contains(err.Error(), `"b"`) {
		t.Fatalf("error %q should name both the requested and the sealed name", err)
	}
}
