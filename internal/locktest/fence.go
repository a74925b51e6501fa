package locktest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/state/internal/fault"
	"github.com/cairnhq/state/internal/lockadmin"
	"github.com/cairnhq/state/internal/storemeta"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// The cases of docs/adr/0026–0028, one per finding of the review they
// answer: each failed on the code before them.

// appValue reads "app" as every holder sees it.
func (e *env) appValue(st *store.Store) string {
	e.t.Helper()
	got, _, err := st.Get(e.ctx(), "app")
	if err != nil {
		e.t.Fatalf("read app: %v", err)
	}
	return string(got)
}

// Finding 1: Release waits for a fenced write in flight (a slow storage,
// no fault) before it deletes the lock, so the next instance's write comes
// after it and survives. Both with the write under a context of its own
// and under Lock.Context, which Release cancels only after the drain.
func testReleaseDrainsWrites(t *testing.T, e *env) {
	for _, c := range []struct {
		name      string
		underLock bool
	}{{"OwnContext", false}, {"UnderLockContext", true}} {
		e.part(t, c.name, func(t *testing.T, e *env) {
			// A lease much longer than the write: the write in flight is
			// answered, not cut off at the lease's end, under load too.
			root := "drain-" + c.name
			delay := e.stale() / 8
			sl := &slow{Backend: e.b, delay: delay, match: hasSuffix("/app"), began: make(chan struct{}, 1)}
			st := e.storeRoot(sl, root)
			oa := e.opts("pod-a")
			oa.HeartbeatInterval = e.stale() / 2
			a := e.acquire(st, oa)
			ctx := e.ctx()
			if c.underLock {
				ctx = a.Context()
			}
			wrote := make(chan error, 1)
			go func() {
				_, err := a.Fence(st).Put(ctx, "app", []byte("from a"), store.PutOptions{})
				wrote <- err
			}()
			// The write is in flight once it reached the storage (a
			// sleep was not enough on a loaded machine: Release then came
			// first and the write was refused, never started).
			select {
			case <-sl.began:
			case err := <-wrote:
				t.Fatalf("the fenced write ended before it reached the storage: %v", err)
			}
			start := time.Now()
			if err := a.Release(e.ctx()); err != nil {
				t.Fatalf("Release: %v", err)
			}
			drained := time.Since(start)
			plain := e.storeRoot(nil, root)
			if got := e.appValue(plain); got != "from a" {
				t.Fatalf("Release returned after %s before the fenced write in flight landed (app = %q)", drained, got)
			}
			if err := <-wrote; err != nil {
				t.Fatalf("the write in flight at Release = %v, want it answered", err)
			}
			t.Logf("Release waited %s for the fenced write in flight", drained.Round(time.Millisecond))
			b := e.acquire(plain, e.opts("pod-b"))
			if _, err := b.Fence(plain).Put(e.ctx(), "app", []byte("from b"), store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			sl.wg.Wait()
			if got := e.appValue(plain); got != "from b" {
				t.Fatalf("app = %q after the released holder's write landed; want the next holder's value", got)
			}
		})
	}
}

// Finding 2: a fenced write that passed its last check and is delivered
// late — after the holder was cut off, lost the lock, and another holder
// wrote — fails on storage with conditional writes instead of replacing
// the new holder's value; its error says it may have landed. On storage
// without conditions a write delivered that late is the residual window
// (docs/lock.md): here it is delivered before the next holder's first
// write, which then wins.
func testLateDeliveredWrite(t *testing.T, e *env) {
	f := fault.New(e.b)
	st := e.store(f)
	a := e.acquire(st, e.opts("pod-a"))
	fenced := a.Fence(st)
	if _, err := fenced.Put(e.ctx(), "app", []byte("a1"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	deliver := f.HoldWrites(func(key string) bool { return strings.HasSuffix(key, "/app") })
	defer deliver()
	// The holder's storage stops answering its heartbeats.
	holder := e.holderObject(a.Record())
	f.SetHook(func(_ context.Context, c fault.Call) error {
		if strings.HasSuffix(c.Key, holder) || c.Op == fault.OpList {
			return fault.ErrInjected
		}
		return nil
	})
	_, cutErr := fenced.Put(context.Background(), "app", []byte("a2, late"), store.PutOptions{})
	if !errors.Is(cutErr, store.ErrFenced) {
		t.Fatalf("a fenced write cut off at the lease's end = %v, want ErrFenced", cutErr)
	}
	o := e.opts("pod-b")
	o.WaitForStale = true
	plain := e.store(nil)
	b := e.acquire(plain, o)
	eventually(t, e.stale()+e.slack(), "the cut-off holder learns it lost", func() bool { return isLost(a) })
	if !e.cas {
		errs := deliver()
		t.Logf("without conditions the late write landed before the next holder wrote: %v", errs)
	}
	if _, err := b.Fence(plain).Put(e.ctx(), "app", []byte("b1"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if e.cas {
		errs := deliver()
		if len(errs) != 1 || errs[0] == nil {
			t.Fatalf("the deposed holder's late write = %v, want it refused by its condition", errs)
		}
	}
	if got := e.appValue(plain); got != "b1" {
		t.Fatalf("app = %q, want the new holder's value", got)
	}
	if !strings.Contains(cutErr.Error(), "may still have landed") {
		t.Fatalf("the cut-off write's error %q does not say that it may have landed", cutErr)
	}
}

// Finding 3 (claims mode): an acquirer whose intent is live but slow to
// confirm is not judged dead by another acquirer whose storage clock runs
// ahead by more than the intent window (a forward step, a skewed Garage
// node): its writer's own stamp says young, so the other backs off and is
// refused once the first confirms — never two holders.
func testSlowIntentSkewedJudge(t *testing.T, e *env) {
	gate := make(chan struct{})
	reached := make(chan struct{})
	var once sync.Once
	f := fault.New(e.b)
	f.SetHook(func(ctx context.Context, c fault.Call) error {
		if c.Op == fault.OpPut && strings.HasSuffix(c.Key, "-2-held") {
			once.Do(func() { close(reached) })
			select {
			case <-gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	type result struct {
		l   *lock.Lock
		err error
	}
	first := make(chan result, 1)
	// The slow confirm is answered well within the first's lease, and
	// not cut off by its request timeout.
	oa := e.opts("pod-a")
	oa.HeartbeatInterval = e.stale() / 2
	oa.RequestTimeout = e.stale() / 2
	go func() {
		l, err := e.tryAcquire(e.store(f), oa)
		first <- result{l, err}
	}()
	select {
	case <-reached:
	case <-time.After(e.intentWindow()):
		t.Fatal("the first acquirer never confirmed")
	}
	ahead := &stepped{Backend: e.b, d: 3 * e.intentWindow()}
	ctx, cancel := context.WithTimeout(e.ctx(), e.stale()/4)
	defer cancel()
	second := make(chan result, 1)
	go func() {
		l, err := lock.Acquire(ctx, e.store(ahead), e.opts("pod-b"))
		if err == nil {
			t.Cleanup(func() { _ = l.Release(context.Background()) })
		}
		second <- result{l, err}
	}()
	r2 := <-second
	close(gate)
	r1 := <-first
	if r1.err != nil {
		t.Fatalf("the slow acquirer: %v", r1.err)
	}
	if r2.err == nil {
		t.Fatalf("a live intent was judged dead on a storage clock %s ahead: two holders (epochs %d and %d)", ahead.d, r1.l.Record().Epoch, r2.l.Record().Epoch)
	}
	if _, err := e.tryAcquire(e.store(ahead), e.opts("pod-b")); !errors.Is(err, lock.ErrHeld) {
		t.Fatalf("after the first confirmed, the skewed acquirer = %v, want a refusal", err)
	}
}

// Finding 4: a holder silent for more than a heartbeat and a half (its
// storage unreachable: suspended, not lost) is not taken over by another
// id whose storage clock stepped forward; it resumes once its storage
// answers.
func testSuspendedHolderForwardStep(t *testing.T, e *env) {
	// Heartbeats of an eighth of the window: silent for three of them, the
	// holder is suspended and far from lost (the window less its margin).
	f := fault.New(e.b)
	oa := e.opts("pod-a")
	oa.HeartbeatInterval = e.stale() / 8
	a := e.acquire(e.store(f), oa)
	f.SetUnavailable(true)
	o := e.opts("pod-b")
	o.WaitForStale = true
	ctx, cancel := context.WithTimeout(e.ctx(), 3*oa.HeartbeatInterval)
	defer cancel()
	_, err := lock.Acquire(ctx, e.store(&stepped{Backend: e.b, d: 2 * e.stale()}), o)
	if err == nil || !errors.Is(err, lock.ErrHeld) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("another id, storage clock stepped forward, holder silent for %s = %v; want it still waiting", 3*oa.HeartbeatInterval, err)
	}
	if !errors.Is(a.Err(), lock.ErrSuspended) {
		t.Fatalf("test bug: the silent holder's fence is %v, want suspended", a.Err())
	}
	f.SetUnavailable(false)
	eventually(t, 2*oa.HeartbeatInterval+e.slack(), "the holder's fence reopens", func() bool { return a.Err() == nil })
	if isLost(a) {
		t.Fatalf("the suspended holder was thrown out: %v", a.Err())
	}
}

// Finding 5: lock break without force takes only what a boot would take
// at once: a live lock that a forward storage step makes look old is
// refused, not broken.
func testBreakForwardStep(t *testing.T, e *env) {
	st := e.store(nil)
	a := e.acquire(st, e.opts("pod-a"))
	ahead := e.store(&stepped{Backend: e.b, d: 2 * e.stale()})
	if _, err := lockadmin.Break(e.ctx(), ahead, lockadmin.BreakOptions{StaleAfter: e.stale()}); !errors.Is(err, lock.ErrHeld) {
		t.Fatalf("Break without force of a live lock under a forward storage step = %v, want a refusal", err)
	}
	never(t, e.heartbeat()+e.slack(), "the live holder was broken", func() bool { return isLost(a) })
}

// Compare-and-swap mode: a heartbeat whose PUT outlives the lease reopens
// the fence only if its conditional write lands on our version: a takeover
// while it was in flight (the lock object written by another) ends it,
// whatever the fence was when the PUT was sent (docs/adr/0066; finding 6
// of ADR 0027 is the claims heartbeat's now).
func testHeartbeatOutlivesLease(t *testing.T, e *env) {
	var armed sync.Once
	sent := make(chan struct{})
	var on sync.Mutex
	active := false
	sl := &slow{Backend: e.b, delay: e.heartbeat() / 2, match: func(key string) bool {
		on.Lock()
		defer on.Unlock()
		if !active || !strings.HasSuffix(key, "/"+storemeta.LockName) {
			return false
		}
		active = false
		armed.Do(func() { close(sent) })
		return true
	}}
	st := e.store(sl)
	o := e.opts("pod-a")
	o.RequestTimeout = e.heartbeat() * 3 / 4
	a := e.acquire(st, o)
	on.Lock()
	active = true
	on.Unlock()
	select {
	case <-sent:
	case <-time.After(2*e.heartbeat() + e.slack()):
		t.Fatal("no heartbeat was sent")
	}
	// While the heartbeat is in flight past the lease's end, another
	// instance takes the lock over.
	succ := e.foreign("pod-b")
	succ.Epoch, succ.Ceiling = a.Record().Epoch+1, a.Record().Ceiling
	e.putRecord(e.store(nil), storemeta.LockName, succ)
	eventually(t, 2*e.heartbeat()+e.slack(), "the holder learns someone took the lock while it was suspended", func() bool { return isLost(a) })
}
