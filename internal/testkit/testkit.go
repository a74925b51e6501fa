// Package testkit holds what cairn-state's own tests share across
// packages: the local backends and real S3 servers a test runs on, a fresh
// identity, the envelope and store built from one, a raw read, a log
// buffer. It is for tests only.
package testkit

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"filippo.io/age"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/fs"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/store"
)

// Local runs fn as subtests "mem" and "fs": on a fresh in-memory backend
// and on a fresh directory (closed when the test ends).
func Local(t *testing.T, fn func(t *testing.T, b backend.Backend)) {
	t.Run("mem", func(t *testing.T) { fn(t, mem.New(mem.Options{})) })
	t.Run("fs", func(t *testing.T) {
		b, err := fs.New(t.TempDir(), fs.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.(io.Closer).Close() })
		fn(t, b)
	})
}

// Read returns the stored bytes of key, bypassing every layer above b.
func Read(t testing.TB, b backend.Backend, key string) []byte {
	t.Helper()
	rc, _, err := b.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return readClose(t, rc)
}

// readClose reads rc to its end and closes it.
func readClose(t testing.TB, rc io.ReadCloser) []byte {
	t.Helper()
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// Snapshot returns every key of b with its version: compare two to see
// that nothing was written.
func Snapshot(t testing.TB, b backend.Backend) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := b.List(context.Background(), "", func(o backend.Object) error {
		out[o.Key] = o.Version
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// SyncBuffer is a bytes.Buffer safe for concurrent writes: a log
// destination.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Identity returns a fresh X25519 identity.
func Identity(t testing.TB) *age.X25519Identity {
	t.Helper()
	return generate(t, age.GenerateX25519Identity)
}

// HybridIdentity returns a fresh post-quantum hybrid identity.
func HybridIdentity(t testing.TB) *age.HybridIdentity {
	t.Helper()
	return generate(t, age.GenerateHybridIdentity)
}

func generate[I age.Identity](t testing.TB, gen func() (I, error)) I {
	t.Helper()
	id, err := gen()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// IdentityFile writes a fresh X25519 identity to identity.txt in a new
// temporary directory, mode 0600, and returns its path and the identity.
func IdentityFile(t testing.TB) (string, *age.X25519Identity) {
	t.Helper()
	id := Identity(t)
	p := filepath.Join(t.TempDir(), "identity.txt")
	if err := os.WriteFile(p, []byte("# test identity\n"+id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p, id
}

// Envelope returns an envelope (default options) that seals with ids, or
// with a fresh identity when none is given.
func Envelope(t testing.TB, ids ...age.Identity) *envelope.Envelope {
	t.Helper()
	if len(ids) == 0 {
		ids = []age.Identity{Identity(t)}
	}
	env, err := envelope.New(ids, nil, envelope.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// Store opens a store over b (storeadmin.Open, no manifest) sealed by a fresh
// identity's envelope.
func Store(t testing.TB, b backend.Backend, opts store.Options) *store.Store {
	t.Helper()
	st, err := storeadmin.Open(b, Envelope(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// Forge writes objects (name → value) as a forger who knows only a
// store's id and one of its public recipients, r (both visible in the
// bucket), could: sealed with a throwaway key to r and to itself, bound
// to the store, each put on b at prefix+name.
func Forge(t testing.TB, b backend.Backend, prefix string, store envelope.StoreID, r age.Recipient, objects map[string]string) {
	t.Helper()
	forger := Identity(t)
	forge, err := envelope.New([]age.Identity{forger}, []age.Recipient{r, forger.Recipient()},
		envelope.Options{StoreID: store, ExactRecipients: true})
	if err != nil {
		t.Fatal(err)
	}
	for name, value := range objects {
		sealed, err := forge.Seal(name, []byte(value))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Put(context.Background(), prefix+name, sealed, backend.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}
