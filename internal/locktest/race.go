package locktest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/state/internal/fault"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// Counts are the backend calls of one step of the lock's life.
type stepCounts struct{ acquire, heartbeat, release fault.Counts }

// testRequestCounts pins the backend calls per step (docs/adr/0066, 0067
// give them): compare-and-swap — acquire a released lock GET, PUT;
// heartbeat one PUT; release one PUT (of a released record). Claims —
// acquire PUT intent, LIST, PUT held, PUT marker; heartbeat PUT, LIST;
// release one multi-object delete. A backend that reports no response
// times adds one clock read per look.
//
// Calls are counted per step, not by time windows: each call is given to
// the step it belongs to as it is made (the acquisition's until its
// clean-up is done, the first heartbeat's from its PUT of the holder's
// object, the release's once it began), and the second heartbeat is held
// back until the release, so that a loaded machine cannot shift a call
// into the wrong step.
func testRequestCounts(t *testing.T, e *env) {
	st := e.store(e.f)
	if e.mode == lock.ModeCAS {
		// The lock object a store keeps (docs/adr/0066): what every
		// acquisition but the store's first finds.
		e.release(e.acquire(st, e.opts("pod-0")))
	}
	var (
		mu      sync.Mutex
		c       stepCounts
		step    = &c.acquire
		holder  string
		beats   int
		second  = make(chan struct{})
		release = make(chan struct{})
	)
	count := func(n *fault.Counts, op fault.Op) {
		switch op {
		case fault.OpDeleteMany:
			n.DeleteMany++
		case fault.OpGet:
			n.Get++
		case fault.OpPut:
			n.Put++
		case fault.OpDelete:
			n.Delete++
		case fault.OpList:
			n.List++
		case fault.OpNow:
			n.Now++
		}
	}
	e.f.SetHook(func(ctx context.Context, call fault.Call) error {
		mu.Lock()
		if holder != "" && call.Op == fault.OpPut && strings.HasSuffix(call.Key, holder) && step != &c.release {
			beats++
			if beats > 1 {
				// The second heartbeat waits for the release (then it is
				// cut off by its request timeout, uncounted).
				mu.Unlock()
				if beats == 2 {
					close(second)
				}
				select {
				case <-release:
				case <-ctx.Done():
				}
				return fmt.Errorf("held back by the test: %w", fault.ErrInjected)
			}
			step = &c.heartbeat
		}
		count(step, call.Op)
		mu.Unlock()
		return nil
	})
	l := e.acquire(st, e.opts("pod-a"))
	mu.Lock()
	holder = e.holderObject(l.Record())
	returned := c.acquire.Total()
	mu.Unlock()
	select {
	case <-second:
	case <-time.After(3*e.heartbeat() + e.slack()):
		t.Fatalf("no second heartbeat within %s", 3*e.heartbeat()+e.slack())
	}
	mu.Lock()
	step = &c.release
	close(release)
	mu.Unlock()
	if err := l.Release(e.ctx()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("requests (%s): acquire %s (of which %d after Acquire returned), heartbeat %s, release %s", e.mode, c.acquire, c.acquire.Total()-returned, c.heartbeat, c.release)
	type want struct{ get, put, delMany, list int }
	check := func(step string, got fault.Counts, w want) {
		t.Helper()
		if got.Get != w.get || got.Put != w.put || got.Delete != 0 || got.DeleteMany != w.delMany || got.List != w.list || got.Now > 1 {
			t.Errorf("%s: %s, want get=%d put=%d delete-many=%d list=%d (now ≤ 1)", step, got, w.get, w.put, w.delMany, w.list)
		}
	}
	if e.mode == lock.ModeCAS {
		// docs/adr/0066: read, write; write; write a released record.
		check("acquire", c.acquire, want{get: 1, put: 1})
		check("heartbeat", c.heartbeat, want{put: 1})
		check("release", c.release, want{put: 1})
	} else {
		// docs/adr/0067: nothing deleted until the release, in one
		// request, without a look.
		check("acquire", c.acquire, want{put: 3, list: 1})
		check("heartbeat", c.heartbeat, want{put: 1, list: 1})
		check("release", c.release, want{delMany: 1})
	}
}

// racerKey marks the context of one racer's acquisition with its index, so
// that a fault hook can tell whose call it is: a call without it is a
// holder's own (heartbeat, clean-up, release).
type racerKey struct{}

// racerOf is the index of the racer whose acquisition made a call, or -1.
func racerOf(ctx context.Context) int {
	if i, ok := ctx.Value(racerKey{}).(int); ok {
		return i
	}
	return -1
}

// tenure is one racer's hold of the lock as the race saw it.
type tenure struct {
	who string
	l   *lock.Lock
	at  time.Time // when its Acquire returned: the first moment its fence could admit a write
}

// raceResult is what one race saw.
type raceResult struct {
	// acquired counts the Acquire calls that returned a lock. More than
	// one is right when every earlier holder had lost its lock by then (a
	// winner whose heartbeats did not get through for the stale window,
	// on a loaded machine, is taken over by a racer that was still
	// trying).
	acquired int
	// mostOpen is the most fences open at one moment: checked at each
	// moment a racer got its lock (the only moments a fence can first
	// open, since nobody can write through a Lock before Acquire returns
	// it) and once all racers are done. One is right.
	mostOpen int
}

// raceWithin starts n acquirers at once on st. At the moment each one gets
// the lock it checks the fence of every earlier winner: an open fence is
// two fences open at the same moment; a suspended one is a takeover of a
// holder that does not count itself lost yet (docs/adr/0028: another id
// takes over only after the holder's long lease); a lost or released one
// is a takeover in turn, which a loaded machine produces. Every racer that
// did not win must be refused with ErrHeld.
func raceWithin(t *testing.T, ctx context.Context, st *store.Store, n int, opts func(i int) lock.Options) raceResult {
	t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		won   []tenure
		errs  []error
		res   raceResult
		start = make(chan struct{})
	)
	// open reports whether l's fence is open now; a suspended one is
	// reported as what it is.
	state := func(l *lock.Lock) string {
		switch err := l.Err(); {
		case err == nil:
			return "open"
		case errors.Is(err, lock.ErrSuspended):
			return "suspended"
		case errors.Is(err, lock.ErrLost):
			return "lost"
		default:
			return fmt.Sprintf("closed (%v)", err)
		}
	}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			o := opts(i)
			l, err := lock.Acquire(context.WithValue(ctx, racerKey{}, i), st, o)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			now, mine := time.Now(), state(l)
			open := 0
			if mine == "open" {
				open = 1
			}
			for _, w := range won {
				switch s := state(w.l); s {
				case "open":
					open++
					t.Errorf("%s got the lock (epoch %d, its fence %s) while %s's fence (epoch %d, got it %s earlier) was open: two fences open at once",
						o.InstanceID, l.Record().Epoch, mine, w.who, w.l.Record().Epoch, now.Sub(w.at))
				case "suspended":
					t.Errorf("%s got the lock (epoch %d) while %s (epoch %d, got it %s earlier) was suspended, not lost: a takeover before the holder counts itself lost",
						o.InstanceID, l.Record().Epoch, w.who, w.l.Record().Epoch, now.Sub(w.at))
				default:
					t.Logf("%s got the lock (epoch %d) %s after %s (epoch %d), whose lock was %s by then: a takeover in turn",
						o.InstanceID, l.Record().Epoch, now.Sub(w.at), w.who, w.l.Record().Epoch, s)
				}
			}
			res.mostOpen = max(res.mostOpen, open)
			res.acquired++
			won = append(won, tenure{who: o.InstanceID, l: l, at: now})
		}()
	}
	close(start)
	wg.Wait()
	open := 0
	for _, w := range won {
		if w.l.Err() == nil {
			open++
		}
	}
	res.mostOpen = max(res.mostOpen, open)
	for _, w := range won {
		_ = w.l.Release(context.Background())
	}
	for _, err := range errs {
		if !errors.Is(err, lock.ErrHeld) {
			t.Errorf("a racer failed otherwise than refused: %v", err)
		}
	}
	if len(won) == 0 {
		t.Errorf("no racer won (%d refused): %v", len(errs), errs)
	}
	return res
}

func testRace(t *testing.T, e *env) {
	turns := 0
	for trial := range e.h.RaceTrials {
		st := e.storeRoot(nil, fmt.Sprintf("race-%d", trial))
		r := raceWithin(t, e.ctx(), st, 8, func(i int) lock.Options { return e.opts(fmt.Sprintf("racer-%d", i)) })
		if r.mostOpen > 1 {
			t.Fatalf("trial %d: %d fences open at one moment (%d acquisitions)", trial, r.mostOpen, r.acquired)
		}
		turns += r.acquired - 1
	}
	t.Logf("%d trials × 8 racers (%s): one fence open at a time in every trial (%d takeovers in turn of a winner that had lost its lock)", e.h.RaceTrials, e.mode, turns)
}

// The race again with every lock request delayed at random up to MaxDelay
// (the case that broke the settle delay): still exactly one winner.
func testRaceDelayed(t *testing.T, e *env) {
	e.f.SetHook(func(ctx context.Context, c fault.Call) error {
		d := time.Duration(rand.Int64N(int64(e.h.MaxDelay) + 1))
		select {
		case <-time.After(d):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	for trial := range e.h.DelayedRaceTrials {
		st := e.storeRoot(e.f, fmt.Sprintf("delayed-%d", trial))
		ctx, cancel := context.WithTimeout(context.Background(), 200*e.h.MaxDelay)
		r := raceWithin(t, ctx, st, 8, func(i int) lock.Options {
			o := e.opts(fmt.Sprintf("racer-%d", i))
			// Room for an acquisition whose every request is slow.
			o.IntentWindow = 20 * e.h.MaxDelay
			o.RequestTimeout = 4 * e.h.MaxDelay
			o.StaleAfter = max(o.StaleAfter, 40*e.h.MaxDelay)
			o.HeartbeatInterval = o.StaleAfter / 4
			return o
		})
		cancel()
		if r.mostOpen > 1 {
			t.Fatalf("trial %d: %d fences open at one moment (%d acquisitions)", trial, r.mostOpen, r.acquired)
		}
	}
	t.Logf("%d trials × 8 racers (%s), every request delayed up to %s: one fence open at a time in every trial", e.h.DelayedRaceTrials, e.mode, e.h.MaxDelay)
}

// What a loaded machine does to the race, in order: the winner's
// heartbeats do not get through (its goroutine starved, its requests timed
// out) until it has lost the lock, while a racer that had not yet sent its
// first request is descheduled for longer than the stale window. When that
// racer runs again the winner's record is stale on both clocks and it takes
// the lock over: two acquisitions, never two open fences. (Counting
// acquisitions, as the race did before, calls that two winners.)
func testRaceTakeoverInTurn(t *testing.T, e *env) {
	st := e.store(e.f)
	wake := make(chan struct{})
	awake := func() bool {
		select {
		case <-wake:
			return true
		default:
			return false
		}
	}
	e.f.SetHook(func(ctx context.Context, c fault.Call) error {
		switch racerOf(ctx) {
		case 1:
			<-wake // descheduled: not even its own request timeout runs
		case -1:
			if !awake() {
				return fmt.Errorf("the winner's request did not get through: %w", fault.ErrInjected)
			}
		}
		return nil
	})
	go func() {
		time.Sleep(e.stale() + e.slack())
		close(wake)
	}()
	r := raceWithin(t, e.ctx(), st, 2, func(i int) lock.Options { return e.opts(fmt.Sprintf("racer-%d", i)) })
	e.f.SetHook(nil)
	if r.acquired != 2 || r.mostOpen != 1 {
		t.Fatalf("%d acquisitions, at most %d fences open at one moment; want 2 acquisitions, one fence at a time", r.acquired, r.mostOpen)
	}
	if _, ok := e.logs.find("state lock lost", "racer-0"); !ok {
		t.Fatalf("the first winner did not report its loss:\n%s", e.logs.dump())
	}
}
