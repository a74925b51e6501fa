package rekey_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"

	"filippo.io/age"
	"go.uber.org/goleak"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/envelope"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/rekey"
	"github.com/cairnhq/state/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func newID(t testing.TB) *age.X25519Identity {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func connect(t testing.TB, b backend.Backend, ids ...age.Identity) (*store.Store, error) {
	t.Helper()
	return store.Connect(context.Background(), b, store.Keys{Identities: ids}, &store.ConnectOptions{Options: store.Options{Logger: quiet()}})
}

// seeded is a store of n objects and a migration-log-like reserved object,
// written by key under the lock as an application would.
func seeded(t testing.TB, b backend.Backend, key age.Identity, n int) map[string]string {
	t.Helper()
	ctx := context.Background()
	st, err := store.Connect(ctx, b, store.Keys{Identities: []age.Identity{key}}, &store.ConnectOptions{Create: true, Options: store.Options{Logger: quiet()}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := lock.Acquire(ctx, st, lock.Options{InstanceID: "app", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if err := st.WithFence(l).CommitManifest(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i := range n {
		name := fmt.Sprintf("obj/%02d", i)
		want[name] = "value " + name
		if _, err := st.WithFence(l).Put(ctx, name, []byte(want[name]), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want[".migrations"] = "the log"
	if _, err := st.WithFence(l).Internal().Put(ctx, ".migrations", []byte("the log"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	return want
}

func TestRun_RotatesTheStore_OldKeyForeignAfterwards(t *testing.T) {
	for _, b := range []backend.Backend{mem.New(mem.Options{}), mem.New(mem.Options{NoConditionalWrites: true})} {
		ctx := t.Context()
		oldKey, newKey := newID(t), newID(t)
		want := seeded(t, b, oldKey, 10)
		var seen []rekey.Progress
		res, err := rekey.Run(ctx, b, &rekey.Options{
			Identities: []age.Identity{newKey}, OldIdentities: []age.Identity{oldKey},
			Lock: lock.Options{InstanceID: "rekey"}, Logger: quiet(),
			Progress: func(p rekey.Progress) { seen = append(seen, p) },
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Total != 11 || res.Resealed != 11 || res.Manifest.Generation != 2 || res.PreviousGeneration != 1 ||
			!slices.Equal(res.Manifest.Recipients, []string{newKey.Recipient().String()}) {
			t.Errorf("result %+v", res)
		}
		if len(seen) != 12 || seen[0].Done != 0 || seen[0].Total != 11 || seen[11].Done != 11 {
			t.Errorf("progress calls %+v", seen)
		}
		if _, err := connect(t, b, oldKey); !errors.Is(err, store.ErrNotMember) {
			t.Fatalf("the old key after the rotation: %v", err)
		}
		st, err := connect(t, b, newKey)
		if err != nil {
			t.Fatal(err)
		}
		for name, v := range want {
			o, err := st.Internal().GetObject(ctx, name)
			if err != nil || string(o.Data) != v || !o.Opened.SameRecipients {
				t.Errorf("%s after the rotation: %q, %+v, %v", name, o.Data, o.Opened, err)
			}
		}
		if _, _, err := st.Internal().Get(ctx, rekey.ProgressName); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("progress record left behind: %v", err)
		}
	}
}

// TestRun_InterruptedAnywhere_EveryObjectOpensWithOldOrNew_ThenResumes
// stops a rekey at every point of its run (before and after each object)
// and checks the crash-order promise: the new key alone belongs to the
// store, every object opens with the old or the new keys, and the same
// call finishes the job.
func TestRun_InterruptedAnywhere_EveryObjectOpensWithOldOrNew_ThenResumes(t *testing.T) {
	const n = 6
	for stopAt := 0; stopAt <= n+1; stopAt++ {
		t.Run(fmt.Sprint("after ", stopAt), func(t *testing.T) {
			b := mem.New(mem.Options{})
			oldKey, newKey := newID(t), newID(t)
			want := seeded(t, b, oldKey, n)
			ctx, cancel := context.WithCancel(t.Context())
			opts := &rekey.Options{
				Identities: []age.Identity{newKey}, OldIdentities: []age.Identity{oldKey},
				Lock: lock.Options{InstanceID: "rekey"}, Logger: quiet(), CheckpointEvery: 2,
				Progress: func(p rekey.Progress) {
					if p.Done == stopAt {
						cancel()
					}
				},
			}
			res, err := rekey.Run(ctx, b, opts)
			cancel()
			if stopAt <= n && !errors.Is(err, context.Canceled) {
				t.Fatalf("interrupted run: %+v, %v", res, err)
			}
			// The manifest moved first: the old key alone is foreign.
			if _, err := connect(t, b, oldKey); !errors.Is(err, store.ErrNotMember) {
				t.Fatalf("the old key alone after the interruption: %v", err)
			}
			both, err := connect(t, b, newKey, oldKey)
			if err != nil {
				t.Fatal(err)
			}
			for name, v := range want {
				if got, _, err := both.Internal().Get(t.Context(), name); err != nil || string(got) != v {
					t.Errorf("%s opens with neither key set: %q, %v", name, got, err)
				}
			}
			opts.Progress = nil
			res, err = rekey.Run(t.Context(), b, opts)
			if err != nil {
				t.Fatal(err)
			}
			if stopAt > 0 && stopAt <= n && !res.Resumed {
				t.Errorf("the second run did not resume: %+v", res)
			}
			newOnly, err := connect(t, b, newKey)
			if err != nil {
				t.Fatal(err)
			}
			for name, v := range want {
				if got, _, err := newOnly.Internal().Get(t.Context(), name); err != nil || string(got) != v {
					t.Errorf("%s with the new key after the resume: %q, %v", name, got, err)
				}
			}
		})
	}
}

func TestRun_LockHeld_NothingChanged(t *testing.T) {
	ctx := t.Context()
	b := mem.New(mem.Options{})
	oldKey, newKey := newID(t), newID(t)
	seeded(t, b, oldKey, 2)
	st, err := connect(t, b, oldKey)
	if err != nil {
		t.Fatal(err)
	}
	l, err := lock.Acquire(ctx, st, lock.Options{InstanceID: "live", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	_, err = rekey.Run(ctx, b, &rekey.Options{Identities: []age.Identity{newKey}, OldIdentities: []age.Identity{oldKey},
		Lock: lock.Options{InstanceID: "rekey"}, Logger: quiet()})
	if !errors.Is(err, lock.ErrHeld) {
		t.Fatalf("rekey with a live holder: %v, want ErrHeld", err)
	}
	if _, err := connect(t, b, oldKey); err != nil {
		t.Fatalf("the store moved although rekey was refused: %v", err)
	}
}

func TestRun_DryRunWithRecovery_ListsForgeriesWritesNothing_ReservedNeverOpened(t *testing.T) {
	ctx := t.Context()
	b := mem.New(mem.Options{})
	writer, recovery, newKey := newID(t), newID(t), newID(t)
	st, err := store.Connect(ctx, b, store.Keys{Identities: []age.Identity{writer}, Recipients: []age.Recipient{recovery.Recipient()}},
		&store.ConnectOptions{Create: true, Options: store.Options{Logger: quiet()}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, "genuine", []byte("v"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	m, _ := st.Manifest()
	forger := newID(t)
	forge, err := envelope.New([]age.Identity{forger}, []age.Recipient{recovery.Recipient(), forger.Recipient()},
		&envelope.Options{StoreID: m.ID, ExactRecipients: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"config/admins", ".migrations", ".lock-epoch"} {
		sealed, err := forge.Seal(name, []byte("forged"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Put(ctx, store.Prefix+name, sealed, backend.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	snapshot := func() map[string]string {
		out := map[string]string{}
		_ = b.List(ctx, "", func(o backend.Object) error { out[o.Key] = o.Version; return nil })
		return out
	}
	before := snapshot()
	opts := &rekey.Options{Identities: []age.Identity{newKey}, Recipients: []age.Recipient{recovery.Recipient()},
		Recovery: []age.Identity{recovery}, DryRun: true, Lock: lock.Options{InstanceID: "rekey"}, Logger: quiet()}
	res, err := rekey.Run(ctx, b, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Unauthenticated, []string{"config/admins", "genuine"}) || !slices.Equal(res.ReservedLeft, []string{".migrations"}) {
		t.Errorf("dry run = %+v", res)
	}
	if after := snapshot(); len(after) != len(before) {
		t.Fatalf("the dry run wrote: %v → %v", before, after)
	} else {
		for k, v := range before {
			if after[k] != v {
				t.Fatalf("the dry run wrote %s", k)
			}
		}
	}
	// For real: the forged reserved object is left as it was; the forged
	// .lock-epoch never set the lock's epoch (the lock never reads through
	// the recovery key).
	opts.DryRun = false
	res, err = rekey.Run(ctx, b, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Lock.Epoch != 1 || !slices.Equal(res.ReservedLeft, []string{".migrations"}) {
		t.Errorf("recovery run = %+v", res)
	}
	after, err := connect(t, b, newKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := after.Internal().Get(ctx, ".migrations"); err == nil {
		t.Error("the forged .migrations was laundered into authenticated state")
	}
	if got, _, err := after.Get(ctx, "genuine"); err != nil || string(got) != "v" {
		t.Errorf("genuine after the recovery: %q, %v", got, err)
	}
}
