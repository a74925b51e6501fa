package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/fault"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/store"
)

// drainFence is a holderFence that counts the writes it admitted and can
// wait for them, as the lock's Release does.
type drainFence struct {
	holderFence
	mu sync.Mutex
	n  int
	wg sync.WaitGroup
}

func (f *drainFence) Enter() (func(), error) {
	if err := f.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.n++
	f.mu.Unlock()
	f.wg.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			f.n--
			f.mu.Unlock()
			f.wg.Done()
		})
	}, nil
}

// inFlight is how many admitted writes have not ended.
func (f *drainFence) inFlight() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// drain waits for every admitted write to end.
func (f *drainFence) drain() { f.wg.Wait() }

// isKeep reports a call that keeps a version in history: a PUT or a COPY
// to a version's entry (not a tombstone).
func isKeep(c fault.Call) bool {
	return (c.Op == fault.OpPut || c.Op == fault.OpCopy) && strings.Contains(c.Key, ".history/") && !strings.HasSuffix(c.Key, ".deleted")
}

// keepGate holds every keep until opened (or until the keep's context
// ends).
type keepGate struct{ open chan struct{} }

func newKeepGate(f *fault.Backend) *keepGate {
	g := &keepGate{open: make(chan struct{})}
	f.SetHook(func(ctx context.Context, c fault.Call) error {
		if !isKeep(c) {
			return nil
		}
		select {
		case <-g.open:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
	return g
}

// keepScene is a fault-wrapped mem store with a view fenced by a
// drainFence of epoch 1, instance pod-a.
func keepScene(t *testing.T, o mem.Options) (*fault.Backend, *store.Store, *drainFence) {
	t.Helper()
	return keepSceneWith(t, o, store.Options{})
}

// keepSceneWith is keepScene with the store's options so.
func keepSceneWith(t *testing.T, o mem.Options, so store.Options) (*fault.Backend, *store.Store, *drainFence) {
	t.Helper()
	f := fault.New(mem.New(o))
	so.Logger = quiet()
	st, err := store.Connect(t.Context(), f, keysOf(testkit.Identity(t)), store.ConnectOptions{Create: true, Options: so})
	if err != nil {
		t.Fatal(err)
	}
	fence := &drainFence{holderFence: holderFence{switchFence: switchFence{epoch: 1}, instance: "pod-a"}}
	v := storeadmin.WithFence(st, fence)
	t.Cleanup(fence.drain)
	if !o.NoConditionalWrites {
		return f, v, fence
	}
	if err := storeadmin.CommitManifest(t.Context(), v); err != nil {
		t.Fatal(err)
	}
	return f, v, fence
}

// ADR 0065: a Put returns once its value is written; the keep of what it
// wrote lands behind it, admitted by the fence, which drains it.
func TestKeepBehind_PutReturnsAtItsWrite_FenceDrainsTheKeep(t *testing.T) {
	ctx := t.Context()
	f, st, fence := keepScene(t, mem.Options{})
	mustPut(t, st, "app/k", "one")
	fence.drain()
	g := newKeepGate(f)
	returned := make(chan store.Info, 1)
	go func() { returned <- mustPut(t, st, "app/k", "two") }()
	var info store.Info
	select {
	case info = <-returned:
	case <-time.After(time.Minute):
		t.Fatal("Put did not return while the keep of what it wrote was held")
	}
	entry := store.Prefix + ".history/app/k/" + info.ID.String()
	if slices.Contains(rawKeys(t, f), entry) {
		t.Fatalf("%s was kept while its keep was held", entry)
	}
	if n := fence.inFlight(); n != 1 {
		t.Fatalf("%d writes in flight after Put returned, want the keep", n)
	}
	close(g.open)
	fence.drain()
	if !slices.Contains(rawKeys(t, f), entry) {
		t.Fatalf("%s not kept once the fence drained", entry)
	}
	vs, err := st.History(ctx, "app/k")
	if err != nil || len(vs) != 2 || !vs[0].Kept || !vs[0].Current {
		t.Fatalf("History = %q, %v", ids(vs), err)
	}
}

// The caller's cancellation, once its Put returned, does not cut the keep
// of what it wrote: the keep runs on until it lands (or the fence's
// deadline).
func TestKeepBehind_CallerCancels_KeepLandsAnyway(t *testing.T) {
	f, st, fence := keepScene(t, mem.Options{})
	g := newKeepGate(f)
	ctx, cancel := context.WithCancel(t.Context())
	info, err := st.Put(ctx, "app/k", []byte("v"), store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	close(g.open)
	fence.drain()
	entry := store.Prefix + ".history/app/k/" + info.ID.String()
	if !slices.Contains(rawKeys(t, f), entry) {
		t.Fatalf("the keep was cut by the caller's cancellation: %s missing", entry)
	}
}

// The next write, delete, restore and the reads of history of the same
// name wait for its keep in flight: none of them starts on the name
// while the keep is held, and each sees the version kept.
func TestKeepBehind_SameNameWaitsForTheKeep(t *testing.T) {
	for _, c := range []struct {
		name string
		op   func(ctx context.Context, st *store.Store, first store.Info) error
	}{
		{"Put", func(ctx context.Context, st *store.Store, _ store.Info) error {
			_, err := st.Put(ctx, "app/k", []byte("two"), store.PutOptions{})
			return err
		}},
		{"Delete", func(ctx context.Context, st *store.Store, _ store.Info) error {
			return st.Delete(ctx, "app/k", store.DeleteOptions{})
		}},
		{"Restore", func(ctx context.Context, st *store.Store, first store.Info) error {
			_, err := st.Restore(ctx, "app/k", first.ID)
			return err
		}},
		{"History", func(ctx context.Context, st *store.Store, first store.Info) error {
			vs, err := st.History(ctx, "app/k")
			if err == nil && (len(vs) != 2 || !vs[0].Kept) {
				err = fmt.Errorf("History = %q, want the held version kept", ids(vs))
			}
			return err
		}},
		{"GetVersion", func(ctx context.Context, st *store.Store, first store.Info) error {
			_, _, err := st.GetVersion(ctx, "app/k", first.ID)
			return err
		}},
		{"ListDeleted", func(ctx context.Context, st *store.Store, _ store.Info) error {
			return st.ListDeleted(ctx, "", func(store.Deleted) error { return nil })
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				f, st, fence := keepScene(t, mem.Options{})
				first := mustPut(t, st, "app/k", "one")
				fence.drain()
				g := newKeepGate(f)
				held := mustPut(t, st, "app/k", "held")
				synctest.Wait()
				before := f.Counts()
				done := make(chan error, 1)
				go func() { done <- c.op(ctx, st, first) }()
				synctest.Wait()
				select {
				case err := <-done:
					t.Fatalf("%s of the name returned (%v) while its keep was held", c.name, err)
				default:
				}
				if got := f.Counts(); got.Total() != before.Total() {
					t.Fatalf("%s sent %v while the name's keep was held", c.name, got)
				}
				close(g.open)
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				fence.drain()
				entry := store.Prefix + ".history/app/k/" + held.ID.String()
				if !slices.Contains(rawKeys(t, f), entry) {
					t.Fatalf("%s missing", entry)
				}
			})
		})
	}
}

// Writes of other names do not wait for a name's keep.
func TestKeepBehind_OtherNamesDoNotWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, st, fence := keepScene(t, mem.Options{})
		mustPut(t, st, "app/a", "one")
		fence.drain()
		g := newKeepGate(f)
		mustPut(t, st, "app/a", "two") // its keep held
		mustPut(t, st, "app/b", "one") // returns: it waits for nothing
		if _, _, err := st.Get(t.Context(), "app/a"); err != nil {
			t.Fatal(err)
		}
		close(g.open)
		fence.drain()
	})
}

// With one version retained, a write's prune deletes the name's only
// entry: it waits until the keep has landed, so that the history folder
// never loses its last object while the keep is written into it (on
// versitygw a keep racing that removal failed with 409
// ExistingObjectIsDirectory, 3 runs in 11 of the retention tests under
// load); and a keep that fails prunes nothing.
func TestKeepBehind_PruneOfEveryEntry_WaitsForTheKeep(t *testing.T) {
	t.Run("keep lands", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f, st, fence := keepSceneWith(t, mem.Options{}, store.Options{History: 1})
			one := mustPut(t, st, "app/k", "one")
			fence.drain()
			g := newKeepGate(f)
			before := f.Counts()
			two := mustPut(t, st, "app/k", "two") // its keep held
			synctest.Wait()
			if got := f.Counts(); got.Delete != before.Delete {
				t.Fatalf("the prune sent %d DELETE while the keep was held", got.Delete-before.Delete)
			}
			close(g.open)
			fence.drain()
			dir := store.Prefix + ".history/app/k/"
			keys := rawKeys(t, f)
			if !slices.Contains(keys, dir+two.ID.String()) || slices.Contains(keys, dir+one.ID.String()) {
				t.Fatalf("history after the keep and the prune = %q; want %s only", keys, two.ID)
			}
		})
	})
	t.Run("keep fails", func(t *testing.T) {
		f, st, fence := keepSceneWith(t, mem.Options{}, store.Options{History: 1})
		one := mustPut(t, st, "app/k", "one")
		fence.drain()
		f.SetHook(func(_ context.Context, c fault.Call) error {
			if isKeep(c) {
				return errors.New("keep refused")
			}
			return nil
		})
		two := mustPut(t, st, "app/k", "two")
		fence.drain()
		f.SetHook(nil)
		vs, err := st.History(t.Context(), "app/k")
		if got, want := ids(vs), []string{two.ID.String() + " current not kept", one.ID.String()}; err != nil || !slices.Equal(got, want) {
			t.Fatalf("History after a failed keep = %q, %v; want %q (the only kept version not pruned)", got, err, want)
		}
	})
}

// A keep that fails is logged, and the next write of the name repairs
// it: the version it replaces is kept first (a COPY), so nothing is lost.
func TestKeepBehind_FailedKeep_RepairedByTheNextWrite(t *testing.T) {
	for _, o := range []mem.Options{{}, {NoConditionalWrites: true}} {
		t.Run(fmt.Sprintf("conditional=%v", !o.NoConditionalWrites), func(t *testing.T) {
			ctx := t.Context()
			f, st, fence := keepScene(t, o)
			var failed sync.Once
			f.SetHook(func(_ context.Context, c fault.Call) error {
				var err error
				if isKeep(c) {
					failed.Do(func() { err = errors.New("keep refused") })
				}
				return err
			})
			one := mustPut(t, st, "app/k", "one")
			fence.drain()
			if slices.Contains(rawKeys(t, f), store.Prefix+".history/app/k/"+one.ID.String()) {
				t.Fatal("the refused keep landed")
			}
			vs, err := st.History(ctx, "app/k")
			if err != nil || len(vs) != 1 || vs[0].Kept {
				t.Fatalf("History after a failed keep = %q, %v; want the current version not kept", ids(vs), err)
			}
			before := f.Counts()
			two := mustPut(t, st, "app/k", "two")
			fence.drain()
			if got := f.Counts(); got.Copy-before.Copy != 1 {
				t.Errorf("the next write made %d COPY, want the repair's", got.Copy-before.Copy)
			}
			vs, err = st.History(ctx, "app/k")
			if got, want := ids(vs), []string{two.ID.String() + " current", one.ID.String()}; err != nil || !slices.Equal(got, want) {
				t.Fatalf("History after the repair = %q, %v; want %q", got, err, want)
			}
			verifyClean(t, st)
		})
	}
}

// No keep outlives its bounds: a fence that is never released, whose
// keep hangs, still lets the keep end — at the fence's deadline, or,
// for a fence without one, at the store's own bound — and no goroutine
// is left (synctest fails a bubble whose goroutines are stuck).
func TestKeepBehind_HungKeep_NeverReleasedFence_EndsNoLeak(t *testing.T) {
	for _, deadline := range []time.Duration{0, 3 * time.Second} {
		t.Run(fmt.Sprintf("deadline=%v", deadline), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, st, fence := keepScene(t, mem.Options{})
				if deadline > 0 {
					fence.setDeadline(time.Now().Add(deadline))
				}
				newKeepGate(f) // never opened
				info := mustPut(t, st, "app/k", "v")
				start := time.Now()
				fence.drain()
				took := time.Since(start)
				if deadline > 0 && took > deadline {
					t.Errorf("the hung keep ended %v after the write, past the fence's deadline (%v)", took, deadline)
				}
				if deadline == 0 && (took <= 0 || took > 10*time.Minute) {
					t.Errorf("the hung keep ended %v after the write", took)
				}
				if slices.Contains(rawKeys(t, f), store.Prefix+".history/app/k/"+info.ID.String()) {
					t.Error("the hung keep landed")
				}
			})
		})
	}
}

// Every kept entry was a current version once: a write refused by its
// condition sends no keep (the keep starts only once the write is
// answered).
func TestKeepBehind_RefusedWrite_NoKeep(t *testing.T) {
	f, st, fence := keepScene(t, mem.Options{})
	mustPut(t, st, "app/k", "one")
	fence.drain()
	before := f.Counts()
	_, err := st.Put(t.Context(), "app/k", []byte("two"), store.PutOptions{IfAbsent: true})
	if !errors.Is(err, store.ErrPreconditionFailed) {
		t.Fatalf("Put if absent of an existing name = %v", err)
	}
	fence.drain()
	if got := f.Counts(); got.Put-before.Put != 1 || got.Copy != before.Copy {
		t.Errorf("a refused write sent %d PUT and %d COPY, want its own PUT only", got.Put-before.Put, got.Copy-before.Copy)
	}
	for _, k := range rawKeys(t, f) {
		if strings.Contains(k, ".history/app/k/") && !strings.HasSuffix(k, "/1.1") {
			t.Errorf("%s kept for a write that was refused", k)
		}
	}
}

var _ backend.Backend = (*fault.Backend)(nil)
