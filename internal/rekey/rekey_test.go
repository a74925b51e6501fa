package rekey_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"testing"

	"filippo.io/age"
	"go.uber.org/goleak"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/rekey"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// rotation is the options of a rekey from oldKey to newKey.
func rotation(oldKey, newKey age.Identity) rekey.Options {
	return rekey.Options{Identities: []age.Identity{newKey}, OldIdentities: []age.Identity{oldKey},
		Lock: lock.Options{InstanceID: "rekey"}, Logger: quiet()}
}

// interrupt runs opts on b and cancels the run at the first progress
// report stop holds for: the run must end with context.Canceled.
func interrupt(t *testing.T, b backend.Backend, opts rekey.Options, stop func(rekey.Progress) bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	opts.Progress = func(p rekey.Progress) {
		if stop(p) {
			cancel()
		}
	}
	if _, err := rekey.Run(ctx, b, opts); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v", err)
	}
}

func connect(t testing.TB, b backend.Backend, ids ...age.Identity) (*store.Store, error) {
	t.Helper()
	return store.Connect(context.Background(), b, store.Keys{Identities: ids}, store.ConnectOptions{Options: store.Options{Logger: quiet()}})
}

// seeded is a store of n objects and a migration-log-like reserved object,
// written by key under the lock as an application would, keeping no
// history (so that the counts here are the objects'; history_test.go
// rekeys a store with history).
func seeded(t testing.TB, b backend.Backend, key age.Identity, n int) map[string]string {
	t.Helper()
	return seededWith(t, b, key, n, store.NoHistory, 1)
}

// seededWith is seeded keeping history versions, each object written
// writes times.
func seededWith(t testing.TB, b backend.Backend, key age.Identity, n, history, writes int) map[string]string {
	t.Helper()
	ctx := context.Background()
	st, err := store.Connect(ctx, b, store.Keys{Identities: []age.Identity{key}}, store.ConnectOptions{Create: true, Options: store.Options{Logger: quiet(), History: history}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := lock.Acquire(ctx, st, lock.Options{InstanceID: "app", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if err := storeadmin.CommitManifest(ctx, l.Fence(st)); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i := range n {
		name := fmt.Sprintf("obj/%02d", i)
		for w := range writes {
			want[name] = fmt.Sprintf("value %s (%d)", name, w)
			if _, err := l.Fence(st).Put(ctx, name, []byte(want[name]), store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	want[".migrations"] = "the log"
	if _, err := storeadmin.Internal(l.Fence(st)).Put(ctx, ".migrations", []byte("the log"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	return want
}

func TestRun_RotatesTheStore_OldKeyForeignAfterwards(t *testing.T) {
	for _, b := range []backend.Backend{mem.New(mem.Options{}), mem.New(mem.Options{NoConditionalWrites: true})} {
		ctx := t.Context()
		oldKey, newKey := testkit.Identity(t), testkit.Identity(t)
		want := seeded(t, b, oldKey, 10)
		var seen []rekey.Progress
		opts := rotation(oldKey, newKey)
		opts.Progress = func(p rekey.Progress) { seen = append(seen, p) }
		res, err := rekey.Run(ctx, b, opts)
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
			o, err := storeadmin.GetObject(ctx, storeadmin.Internal(st), name)
			if err != nil || string(o.Data) != v || !o.Opened.SameRecipients {
				t.Errorf("%s after the rotation: %q, %+v, %v", name, o.Data, o.Opened, err)
			}
		}
		if _, _, err := storeadmin.Internal(st).Get(ctx, rekey.ProgressName); !errors.Is(err, store.ErrNotFound) {
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
			oldKey, newKey := testkit.Identity(t), testkit.Identity(t)
			want := seeded(t, b, oldKey, n)
			ctx, cancel := context.WithCancel(t.Context())
			opts := rotation(oldKey, newKey)
			opts.CheckpointEvery = 2
			opts.Progress = func(p rekey.Progress) {
				if p.Done == stopAt {
					cancel()
				}
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
				if got, _, err := storeadmin.Internal(both).Get(t.Context(), name); err != nil || string(got) != v {
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
				if got, _, err := storeadmin.Internal(newOnly).Get(t.Context(), name); err != nil || string(got) != v {
					t.Errorf("%s with the new key after the resume: %q, %v", name, got, err)
				}
			}
		})
	}
}

func TestRun_LockHeld_NothingChanged(t *testing.T) {
	ctx := t.Context()
	b := mem.New(mem.Options{})
	oldKey, newKey := testkit.Identity(t), testkit.Identity(t)
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
	_, err = rekey.Run(ctx, b, rotation(oldKey, newKey))

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
	writer, recovery, newKey := testkit.Identity(t), testkit.Identity(t), testkit.Identity(t)
	st, err := store.Connect(ctx, b, store.Keys{Identities: []age.Identity{writer}, Recipients: []age.Recipient{recovery.Recipient()}},
		store.ConnectOptions{Create: true, Options: store.Options{Logger: quiet()}})

	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, "genuine", []byte("v"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	m, _ := storeadmin.Manifest(st)
	testkit.Forge(t, b, store.Prefix, m.ID, recovery.Recipient(), map[string]string{"config/admins": "forged", ".migrations": "forged", ".lock-epoch": "forged"})
	before := testkit.Snapshot(t, b)
	opts := rekey.Options{Identities: []age.Identity{newKey}, Recipients: []age.Recipient{recovery.Recipient()},
		Recovery: []age.Identity{recovery}, DryRun: true, Lock: lock.Options{InstanceID: "rekey"}, Logger: quiet()}
	res, err := rekey.Run(ctx, b, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Unauthenticated, []string{"config/admins", "genuine"}) || !slices.Equal(res.ReservedLeft, []string{".lock-epoch", ".migrations"}) {
		t.Errorf("dry run = %+v", res)
	}
	if after := testkit.Snapshot(t, b); !maps.Equal(before, after) {
		t.Fatalf("the dry run wrote: %v → %v", before, after)
	}
	// For real: the forged reserved objects are left as they were. The
	// forged .lock-epoch (the legacy epoch name, which the lock no longer
	// reads: a reserved name like any other) never set the lock's epoch.
	opts.DryRun = false
	res, err = rekey.Run(ctx, b, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Lock.Epoch != 1 || !slices.Equal(res.ReservedLeft, []string{".lock-epoch", ".migrations"}) {
		t.Errorf("recovery run = %+v", res)
	}
	after, err := connect(t, b, newKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := storeadmin.Internal(after).Get(ctx, ".migrations"); err == nil {
		t.Error("the forged .migrations was laundered into authenticated state")
	}
	if got, _, err := after.Get(ctx, "genuine"); err != nil || string(got) != "v" {
		t.Errorf("genuine after the recovery: %q, %v", got, err)
	}
}

func TestRun_NothingToChange_SaysSoAndWritesNothing_UnlessRestart(t *testing.T) {
	for _, b := range []backend.Backend{mem.New(mem.Options{}), mem.New(mem.Options{NoConditionalWrites: true})} {
		ctx := t.Context()
		key := testkit.Identity(t)
		seeded(t, b, key, 5)
		before := testkit.Snapshot(t, b)
		var checking int
		opts := rekey.Options{Identities: []age.Identity{key}, Lock: lock.Options{InstanceID: "rekey"}, Logger: quiet(),
			Progress: func(p rekey.Progress) {
				if p.Checking {
					checking++
				}
			}}
		res, err := rekey.Run(ctx, b, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !res.NothingToChange || res.Resealed != 0 || res.UpToDate != 6 || res.Total != 6 || checking != 7 {
			t.Errorf("a rekey to the store's own set: %+v (checking calls %d)", res, checking)
		}
		if after := testkit.Snapshot(t, b); !maps.Equal(before, after) {
			t.Errorf("a rekey with nothing to change wrote:\nbefore %v\nafter  %v", before, after)
		}
		opts.Restart, opts.Progress = true, nil
		res, err = rekey.Run(ctx, b, opts)
		if err != nil {
			t.Fatal(err)
		}
		if res.NothingToChange || res.Resealed != 6 {
			t.Errorf("--restart: %+v, want every object re-sealed", res)
		}
	}
}

func TestRun_InterruptedThenRecordLost_ResealsOnlyWhatIsNotSealedToTheSet(t *testing.T) {
	b := mem.New(mem.Options{})
	oldKey, newKey := testkit.Identity(t), testkit.Identity(t)
	seeded(t, b, oldKey, 8)
	opts := rotation(oldKey, newKey)
	interrupt(t, b, opts, func(p rekey.Progress) bool { return p.Resealed == 3 })
	// The record lost (removed by hand): the store's set is already the
	// new one, so the look finds the objects still sealed to the old.
	if err := b.Delete(t.Context(), store.Prefix+rekey.ProgressName, backend.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := rekey.Run(t.Context(), b, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.NothingToChange || res.UpToDate != 3 || res.Resealed != 6 || res.Resumed {
		t.Errorf("after a lost record: %+v, want 3 up to date and 6 re-sealed", res)
	}
}

func TestReadProgress_InterruptedRun_SaysHowFarAndHowToResume(t *testing.T) {
	b := mem.New(mem.Options{})
	oldKey, newKey := testkit.Identity(t), testkit.Identity(t)
	seeded(t, b, oldKey, 6)
	opts := rotation(oldKey, newKey)
	opts.ResumeCommand = "cairn-state rekey --identity new.txt --old-identity old.txt"
	// Before the first object: the record is there from the start.
	interrupt(t, b, opts, func(p rekey.Progress) bool { return p.Done == 0 })
	st, err := connect(t, b, newKey)
	if err != nil {
		t.Fatal(err)
	}
	got, err := rekey.ReadProgress(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	if got == nil || !got.Readable || got.Done != 0 || got.Total != 7 || got.Resume != opts.ResumeCommand || got.InstanceID != "rekey" || !got.Pending("obj/00") {
		t.Fatalf("ReadProgress after an interruption at 0: %+v", got)
	}
	// Without a key, only its presence is known.
	keyless, err := store.Connect(t.Context(), b, store.Keys{}, store.ConnectOptions{Options: store.Options{Logger: quiet()}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := rekey.ReadProgress(t.Context(), keyless); err != nil || got == nil || got.Readable || !got.Pending("obj/05") {
		t.Errorf("ReadProgress without a key: %+v, %v", got, err)
	}
	// Finished, there is none.
	if _, err := rekey.Run(t.Context(), b, opts); err != nil {
		t.Fatal(err)
	}
	if got, err := rekey.ReadProgress(t.Context(), st); err != nil || got != nil {
		t.Errorf("ReadProgress after the run finished: %+v, %v", got, err)
	}
}
