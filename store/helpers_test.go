package store_test

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/store"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(helperEnv); role != "" {
		os.Exit(runHelper(role))
	}
	goleak.VerifyTestMain(m)
}

// newStore returns a store over a fresh in-memory backend.
func newStore(t testing.TB, opts store.Options) (*store.Store, backend.Backend) {
	t.Helper()
	b := mem.New(mem.Options{})
	s := testkit.Store(t, b, opts)
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
var rawGet = testkit.Read

// switchFence is a storeadmin.Fence that can be tripped, with an optional
// deadline, an epoch and a write sequence.
type switchFence struct {
	mu       sync.Mutex
	err      error
	deadline time.Time
	epoch    uint64
	seq      uint64
}

func (f *switchFence) NextWrite() (uint64, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	return f.epoch, f.seq
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

func (f *switchFence) Enter() (func(), error) {
	if err := f.Err(); err != nil {
		return nil, err
	}
	return func() {}, nil
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

// putSecret opens a store under root on b and writes a known secret
// through it under several names (returned) and under the reserved name
// .lock: the raw tests then look for the secret in what the storage holds.
func putSecret(t *testing.T, b backend.Backend, root string) (s *store.Store, secret []byte, names []string) {
	t.Helper()
	s = testkit.Store(t, b, store.Options{Root: root})
	secret = []byte("the-launch-code-is-0000-and-must-never-be-stored")
	names = []string{"token", "keys/signing.pem", "db/app.sqlite", "ünïcode name"}
	for _, n := range names {
		if _, err := s.Put(t.Context(), n, secret, store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := storeadmin.Internal(s).Put(t.Context(), ".lock", secret, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	return s, secret, names
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// sameObject compares two Infos as descriptions of one object version: the
// storage's clock at each answer (Now) may differ.
func sameObject(a, b store.Info) bool {
	a.Now, b.Now = time.Time{}, time.Time{}
	return a == b
}
