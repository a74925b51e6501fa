package locktest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/state/backend/fault"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// Counts are the backend calls of one step of the lock's life.
type stepCounts struct{ acquire, heartbeat, release fault.Counts }

// testRequestCounts pins the backend calls per step (docs/adr/0019, 0020
// give them): compare-and-swap — acquire a free lock LIST, PUT lock, PUT
// marker, LIST; heartbeat one PUT; release one DELETE. Claims — acquire
// PUT intent, LIST, PUT held, PUT marker, then DELETE intent (in the
// background); heartbeat PUT, LIST; release LIST, DELETE. A backend that
// reports no response times adds one clock read per look.
func testRequestCounts(t *testing.T, e *env) {
	st := e.store(e.f)
	settle := func() fault.Counts {
		// Let the background clean-up finish: counts stop moving.
		var last fault.Counts
		for i := 0; i < 3; {
			time.Sleep(e.heartbeat() / 8)
			if c := e.f.Counts(); c == last {
				i++
			} else {
				last, i = c, 0
			}
		}
		return last
	}
	e.f.ResetCounts()
	l := e.acquire(st, e.opts("pod-a"))
	var c stepCounts
	returned := e.f.Counts().Total()
	c.acquire = settle() // with the clean-up that follows in the background
	cleanup := c.acquire.Total() - returned
	e.f.ResetCounts()
	eventually(t, 2*e.heartbeat()+e.slack(), "one heartbeat", func() bool { return e.f.Counts().Put >= 1 })
	time.Sleep(e.heartbeat() / 4)
	c.heartbeat = e.f.Counts()
	e.f.ResetCounts()
	if err := l.Release(e.ctx()); err != nil {
		t.Fatal(err)
	}
	c.release = e.f.Counts()
	t.Logf("requests (%s): acquire %s (of which %d after Acquire returned), heartbeat %s, release %s", e.mode, c.acquire, cleanup, c.heartbeat, c.release)
	type want struct{ get, put, del, list, now int }
	check := func(step string, got fault.Counts, w want) {
		t.Helper()
		if got.Get != w.get || got.Put != w.put || got.Delete != w.del || got.List != w.list || got.Now > 1 {
			t.Errorf("%s: %s, want get=%d put=%d delete=%d list=%d (now ≤ 1)", step, got, w.get, w.put, w.del, w.list)
		}
	}
	if e.mode == lock.ModeCAS {
		check("acquire", c.acquire, want{put: 2, list: 2})
		check("heartbeat", c.heartbeat, want{put: 1})
		check("release", c.release, want{del: 1})
	} else {
		check("acquire", c.acquire, want{put: 3, list: 1, del: 1})
		check("heartbeat", c.heartbeat, want{put: 1, list: 1})
		check("release", c.release, want{del: 1, list: 1})
	}
}

// raceOnce starts 8 acquirers at once on st and returns how many held the
// lock at the same time (at most one is right). Every one that did not win
// must be refused with ErrHeld.
func raceOnce(t *testing.T, e *env, st *store.Store, opts func(i int) lock.Options) int {
	t.Helper()
	return raceWithin(t, e.ctx(), st, opts)
}

func raceWithin(t *testing.T, ctx context.Context, st *store.Store, opts func(i int) lock.Options) int {
	t.Helper()
	const racers = 8
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		holding []*lock.Lock
		errs    []error
		start   = make(chan struct{})
	)
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			l, err := lock.Acquire(ctx, st, opts(i))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			holding = append(holding, l)
		}()
	}
	close(start)
	wg.Wait()
	held := 0
	for _, l := range holding {
		if l.Err() == nil || errors.Is(l.Err(), lock.ErrSuspended) {
			held++
		}
		_ = l.Release(context.Background())
	}
	for _, err := range errs {
		if !errors.Is(err, lock.ErrHeld) {
			t.Errorf("a racer failed otherwise than refused: %v", err)
		}
	}
	if len(holding) == 0 {
		t.Errorf("no racer won (%d refused): %v", len(errs), errs)
	}
	return max(held, len(holding))
}

func testRace(t *testing.T, e *env) {
	for trial := range e.h.RaceTrials {
		st := e.storeRoot(nil, fmt.Sprintf("race-%d", trial))
		if n := raceOnce(t, e, st, func(i int) lock.Options { return e.opts(fmt.Sprintf("racer-%d", i)) }); n != 1 {
			t.Fatalf("trial %d: %d winners", trial, n)
		}
	}
	t.Logf("%d trials × 8 racers (%s): exactly one winner in every trial", e.h.RaceTrials, e.mode)
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
		n := raceWithin(t, ctx, st, func(i int) lock.Options {
			o := e.opts(fmt.Sprintf("racer-%d", i))
			// Room for an acquisition whose every request is slow.
			o.IntentWindow = 20 * e.h.MaxDelay
			o.RequestTimeout = 4 * e.h.MaxDelay
			o.StaleAfter = max(o.StaleAfter, 40*e.h.MaxDelay)
			o.HeartbeatInterval = o.StaleAfter / 4
			return o
		})
		cancel()
		if n != 1 {
			t.Fatalf("trial %d: %d winners", trial, n)
		}
	}
	t.Logf("%d trials × 8 racers (%s), every request delayed up to %s: exactly one winner in every trial", e.h.DelayedRaceTrials, e.mode, e.h.MaxDelay)
}
