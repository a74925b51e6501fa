package lock_test

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"path"
	"strings"
	"sync"
	"testing"

	"filippo.io/age"
	"github.com/cairnhq/state/backend/fault"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/envelope"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

func envelopeStore(t *testing.T, f *fault.Backend) *store.Store {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	env, err := envelope.New([]age.Identity{id}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(f, env, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// A lock sealed to a key this process does not hold (an identity rotation,
// another deployment) is judged by its age: refused while fresh, saying
// whose key, after one read of it — the envelope's typed error needs no
// retry.
func TestAcquire_LockSealedToAnotherKey_RefusedWhileFreshWithoutRetry(t *testing.T) {
	ctx := context.Background()
	f := fault.New(mem.New(mem.Options{}))
	other := envelopeStore(t, f)
	l, err := lock.Acquire(ctx, other, lock.Options{InstanceID: "pod-a", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)

	ours := envelopeStore(t, f)
	var mu sync.Mutex
	gets := map[string]int{}
	f.SetHook(func(_ context.Context, c fault.Call) error {
		if c.Op == fault.OpGet {
			mu.Lock()
			gets[path.Base(c.Key)]++
			mu.Unlock()
		}
		return nil
	})
	_, err = lock.Acquire(ctx, ours, lock.Options{InstanceID: "pod-b", Logger: quiet()})
	f.SetHook(nil)
	var he *lock.HeldError
	if !errors.As(err, &he) || he.Unreadable == "" || !strings.Contains(err.Error(), "held by an instance whose key this process does not hold") {
		t.Fatalf("Acquire over a live lock sealed to another key = %v, want a refusal saying whose key", err)
	}
	if want := map[string]int{lock.Name: 1}; !maps.Equal(gets, want) {
		t.Fatalf("gets per object %v, want %v (no retry for a typed envelope error)", gets, want)
	}
	if l.Err() != nil {
		t.Fatalf("the live holder with the other key: %v", l.Err())
	}
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }
