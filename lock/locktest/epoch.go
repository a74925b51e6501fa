package locktest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/fault"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// wantEpoch fails the test unless l holds epoch want.
func wantEpoch(t *testing.T, l *lock.Lock, want uint64, what string) {
	t.Helper()
	if got := l.Record().Epoch; got != want {
		t.Fatalf("%s: epoch %d, want %d", what, got, want)
	}
}

func (e *env) release(l *lock.Lock) {
	e.t.Helper()
	if err := l.Release(e.ctx()); err != nil {
		e.t.Fatalf("Release: %v", err)
	}
}

// savedEpoch reads the epoch object as an independent reader would.
func (e *env) savedEpoch(st *store.Store) (uint64, bool) {
	e.t.Helper()
	data, _, err := st.Internal().Get(e.ctx(), lock.EpochName)
	if errors.Is(err, backend.ErrNotFound) {
		return 0, false
	}
	if err != nil {
		e.t.Fatalf("read %s: %v", lock.EpochName, err)
	}
	var r struct {
		Epoch uint64 `json:"epoch"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		e.t.Fatalf("%s holds %q: %v", lock.EpochName, data, err)
	}
	return r.Epoch, true
}

func (e *env) writeEpoch(st *store.Store, data []byte) {
	e.t.Helper()
	if _, err := st.Internal().Put(e.ctx(), lock.EpochName, data, store.PutOptions{}); err != nil {
		e.t.Fatalf("write %s: %v", lock.EpochName, err)
	}
}

func testEpochAcrossRelease(t *testing.T, e *env) {
	st := e.store(nil)
	for i, id := range []string{"pod-a", "pod-b", "pod-a"} {
		l := e.acquire(st, e.opts(id))
		wantEpoch(t, l, uint64(i+1), "acquisition "+id+" after a graceful release")
		e.release(l)
		// Release still deletes the lock object; the epoch outlives it.
		if s := e.status(st); s.Present {
			t.Fatalf("lock object left after release: %+v", s)
		}
		if n, ok := e.savedEpoch(st); !ok || n != uint64(i+1) {
			t.Fatalf("saved epoch after releasing epoch %d = %d (present %v)", i+1, n, ok)
		}
	}
	// Sealed like all state: the raw epoch object does not show the
	// releaser.
	key, err := st.Internal().Key(lock.EpochName)
	if err != nil {
		t.Fatal(err)
	}
	if raw := readRaw(t, e.b, key); strings.Contains(string(raw), "pod-a") || strings.Contains(string(raw), "epoch") {
		t.Fatalf("the raw epoch object is in clear: %q", raw)
	}
}

func testEpochAcrossBreak(t *testing.T, e *env) {
	ctx := e.ctx()
	st := e.store(nil)
	a := e.acquire(st, e.opts("pod-a"))
	if _, err := lock.Break(ctx, st, lock.BreakOptions{Force: true, Holder: "pod-a", StaleAfter: e.h.StaleAfter}); err != nil {
		t.Fatalf("forced break: %v", err)
	}
	b := e.acquire(st, e.opts("pod-b"))
	wantEpoch(t, b, 2, "acquisition after a forced break of epoch 1")
	select {
	case <-a.Lost():
	case <-time.After(e.h.StaleAfter):
		t.Fatal("holder of a broken lock not told")
	}

	// A stale foreign lock at epoch 7, broken by an operator.
	st2 := e.storeRoot(nil, "stale")
	e.writeRecord(st2, foreign("pod-s"))
	e.waitStale(st2)
	if _, err := lock.Break(ctx, st2, lock.BreakOptions{StaleAfter: e.h.StaleAfter}); err != nil {
		t.Fatalf("break stale: %v", err)
	}
	wantEpoch(t, e.acquire(st2, e.opts("pod-b")), 8, "acquisition after breaking a stale epoch-7 lock")
}

func testEpochAcrossStaleTakeover(t *testing.T, e *env) {
	st := e.store(nil)
	e.release(e.acquire(st, e.opts("pod-a")))
	e.release(e.acquire(st, e.opts("pod-a")))
	a, resume := stalledHolder(t, e) // epoch 3, then silent
	wantEpoch(t, a, 3, "third acquisition")
	e.waitStale(st)
	b := e.acquire(st, e.opts("pod-b"))
	wantEpoch(t, b, 4, "takeover of the stale epoch-3 lock")
	resume()
	if err := a.Release(e.ctx()); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Release after loss = %v, want ErrLost", err)
	}
	// The loser saved nothing: the new holder's release counts on.
	e.release(b)
	wantEpoch(t, e.acquire(st, e.opts("pod-c")), 5, "acquisition after the new holder's release")
}

func testEpochNeverLowered(t *testing.T, e *env) {
	st := e.store(e.f)
	sealed := func(n uint64) []byte { return []byte(`{"epoch":` + jsonNum(n) + `}`) }
	e.writeEpoch(st, sealed(10))
	a := e.acquire(st, e.opts("pod-a"))
	wantEpoch(t, a, 11, "acquisition over a saved epoch 10")
	// Something saved a higher epoch while a held the lock (an operator's
	// restore, an older holder's late save): a's release must not lower it.
	e.writeEpoch(st, sealed(20))
	e.release(a)
	if n, _ := e.savedEpoch(st); n != 20 {
		t.Fatalf("release lowered the saved epoch to %d, want 20", n)
	}
	wantEpoch(t, e.acquire(st, e.opts("pod-b")), 21, "acquisition over a saved epoch 20")

	// A release that cannot save the epoch leaves the lock to go stale
	// rather than let the epoch start again.
	st2 := e.storeRoot(e.f, "save-fails")
	c := e.acquire(st2, e.opts("pod-c"))
	key, err := st2.Internal().Key(lock.EpochName)
	if err != nil {
		t.Fatal(err)
	}
	e.f.SetHook(func(_ context.Context, call fault.Call) error {
		if call.Op == fault.OpPut && call.Key == key {
			return fault.ErrInjected
		}
		return nil
	})
	err = c.Release(e.ctx())
	e.f.SetHook(nil)
	if !errors.Is(err, fault.ErrInjected) {
		t.Fatalf("Release with a failing epoch save = %v, want the save's error", err)
	}
	if s := e.status(st2); !s.Present || s.Record.AcquisitionID != c.Record().AcquisitionID {
		t.Fatalf("lock after a failed epoch save = %+v, want it left in place", s)
	}
	// The same instance restarting takes it over at once, counting on.
	wantEpoch(t, e.acquire(st2, e.opts("pod-c")), 2, "restart after a failed release")
}

func jsonNum(n uint64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func testGarbageEpoch(t *testing.T, e *env) {
	cases := []struct {
		name  string
		write func(st *store.Store)
	}{
		{"SealedToAnotherIdentity", func(st *store.Store) { e.writeEpoch(e.otherKeyStore(st), []byte(`{"epoch":41}`)) }},
		{"NotJSON", func(st *store.Store) { e.writeEpoch(st, []byte("{not json")) }},
		{"EpochZero", func(st *store.Store) { e.writeEpoch(st, []byte(`{"epoch":0}`)) }},
		{"EpochNegative", func(st *store.Store) { e.writeEpoch(st, []byte(`{"epoch":-3}`)) }},
		{"NotSealed", func(st *store.Store) {
			e.writeGarbage(st, lock.EpochName)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := e.storeRoot(nil, "garbage-epoch-"+c.name)
			c.write(st)
			l := e.acquire(st, e.opts("pod-a"))
			wantEpoch(t, l, 1, "acquisition over an unreadable saved epoch")
			// Release replaces the garbage with a readable epoch.
			e.release(l)
			if n, ok := e.savedEpoch(st); !ok || n != 1 {
				t.Fatalf("saved epoch after release = %d (present %v), want 1", n, ok)
			}
			wantEpoch(t, e.acquire(st, e.opts("pod-b")), 2, "acquisition after the garbage was replaced")

			// Beside a readable lock the saved epoch is not read at all.
			st2 := e.storeRoot(nil, "garbage-epoch-held-"+c.name)
			c.write(st2)
			e.writeRecord(st2, foreign("pod-a"))
			wantEpoch(t, e.acquire(st2, e.opts("pod-a")), 8, "restart over a readable epoch-7 lock")
		})
	}
	if _, ok := e.logs.find("WARN", "saved lock epoch is unreadable"); !ok {
		t.Fatalf("no warning logged for an unreadable saved epoch:\n%s", e.logs.dump())
	}
}
