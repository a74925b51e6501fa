package store_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"filippo.io/age"
	"go.uber.org/goleak"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/envelope"
	"github.com/cairnhq/state/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newSealer returns the product's sealer, an envelope with a fresh X25519
// identity.
func newSealer(t testing.TB) store.Sealer {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	env, err := envelope.New([]age.Identity{id}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

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

// switchFence is a store.Fence that can be tripped, with an optional
// deadline.
type switchFence struct {
	mu       sync.Mutex
	err      error
	deadline time.Time
}

func (f *switchFence) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func (f *switchFence) Deadline() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.deadline, !f.deadline.IsZero()
}

func (f *switchFence) setDeadline(d time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deadline = d
}

func (f *switchFence) trip(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// sameObject compares two Infos as descriptions of one object version: the
// storage's clock at each answer (Now) may differ.
func sameObject(a, b store.Info) bool {
	a.Now, b.Now = time.Time{}, time.Time{}
	return a == b
}
