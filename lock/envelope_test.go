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

	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/fault"
	"github.com/cairnhq/state/internal/storemeta"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// A lock sealed to a key this process does not hold (an identity rotation,
// another deployment) is judged by its age: refused while fresh, saying
// whose key, after one read of it — the envelope's typed error needs no
// retry.
func TestAcquire_LockSealedToAnotherKey_RefusedWhileFreshWithoutRetry(t *testing.T) {
	ctx := context.Background()
	f := fault.New(mem.New(mem.Options{}))
	other := testkit.Store(t, f, store.Options{})
	l, err := lock.Acquire(ctx, other, lock.Options{InstanceID: "pod-a", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)

	ours := testkit.Store(t, f, store.Options{})
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
	if want := map[string]int{storemeta.LockName: 1}; !maps.Equal(gets, want) {
		t.Fatalf("gets per object %v, want %v (no retry for a typed envelope error)", gets, want)
	}
	if l.Err() != nil {
		t.Fatalf("the live holder with the other key: %v", l.Err())
	}
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }
