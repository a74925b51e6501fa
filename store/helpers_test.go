package store_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"

	"filippo.io/age"
	"go.uber.org/goleak"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ageSealer is a real age (X25519) sealer that binds each object to its
// name by sealing the name with the plaintext. The store's tests use it
// where envelope's extra guarantees are not the subject.
type ageSealer struct {
	id *age.X25519Identity
}

func newAgeSealer(t testing.TB) *ageSealer {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return &ageSealer{id: id}
}

var errNameMismatch = errors.New("sealed for another name")

func (a *ageSealer) Seal(name string, plaintext []byte) ([]byte, error) {
	var out bytes.Buffer
	w, err := age.Encrypt(&out, a.id.Recipient())
	if err != nil {
		return nil, err
	}
	w.Write(binary.AppendUvarint(nil, uint64(len(name))))
	io.WriteString(w, name)
	w.Write(plaintext)
	if err := w.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func (a *ageSealer) Open(name string, sealed []byte) ([]byte, error) {
	r, err := age.Decrypt(bytes.NewReader(sealed), a.id)
	if err != nil {
		return nil, fmt.Errorf("open %q: %w", name, err)
	}
	plain, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("open %q: %w", name, err)
	}
	n, k := binary.Uvarint(plain)
	if k <= 0 || uint64(len(plain)-k) < n || string(plain[k:k+int(n)]) != name {
		return nil, fmt.Errorf("open %q: %w", name, errNameMismatch)
	}
	return plain[k+int(n):], nil
}

// newSealer returns the sealer the store's tests use.
func newSealer(t testing.TB) store.Sealer { return newAgeSealer(t) }

// newStore returns a store over a fresh in-memory backend.
func newStore(t testing.TB, opts store.Options) (*store.Store, *mem.Backend) {
	t.Helper()
	b := mem.New(mem.Options{})
	s, err := store.Open(b, newSealer(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, b
}

// rawKeys lists every key in b.
func rawKeys(t testing.TB, b backend.Backend) []string {
	t.Helper()
	var keys []string
	if err := b.List(context.Background(), "", func(o backend.Object) error {
		keys = append(keys, o.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

// rawGet reads the stored bytes of key from b.
func rawGet(t testing.TB, b backend.Backend, key string) []byte {
	t.Helper()
	rc, _, err := b.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// switchFence is a store.Fence that can be tripped.
type switchFence struct {
	mu  sync.Mutex
	err error
}

func (f *switchFence) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func (f *switchFence) trip(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}
