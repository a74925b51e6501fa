package lock_test

import (
	"context"
	"maps"
	"path"
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

// After an identity rotation the old lock does not open: the envelope says
// so with a typed error, so the lock takes it over at once, without the
// retry it gives an untyped read failure.
func TestAcquire_LockSealedToRotatedAwayKey_TakenOverWithoutRetry(t *testing.T) {
	ctx := context.Background()
	f := fault.New(mem.New(mem.Options{}))
	old := envelopeStore(t, f)
	l, err := lock.Acquire(ctx, old, lock.Options{InstanceID: "pod-a"})
	if err != nil {
		t.Fatal(err)
	}
	l.Release(ctx) // stops the heartbeat; the object is then deleted…
	if _, err := old.Internal().Put(ctx, lock.Name, []byte(`{"instance_id":"pod-a","acquisition_id":"x"}`), store.PutOptions{}); err != nil {
		t.Fatal(err) // …so write one, sealed to the old key, as a crashed holder would leave it
	}

	rotated := envelopeStore(t, f)
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
	nl, err := lock.Acquire(ctx, rotated, lock.Options{InstanceID: "pod-b"})
	f.SetHook(nil)
	if err != nil {
		t.Fatalf("Acquire over a lock sealed to another key: %v", err)
	}
	defer nl.Release(ctx)
	// The lock does not open, so the saved epoch is read too; it was saved
	// by the old key's release and does not open either. One get each.
	if want := map[string]int{lock.Name: 1, lock.EpochName: 1}; !maps.Equal(gets, want) {
		t.Fatalf("gets per object %v, want %v (no retry for a typed envelope error)", gets, want)
	}
	// Neither the lock nor the saved epoch opens: counting starts again.
	if nl.Record().Epoch != 1 {
		t.Fatalf("epoch %d", nl.Record().Epoch)
	}
}
