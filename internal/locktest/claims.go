package locktest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cairnhq/state/internal/fault"
	"github.com/cairnhq/state/internal/lockadmin"
	"github.com/cairnhq/state/lock"
)

// intentWindow is the intent window the suite's options give (the lock's
// default: half the stale window, within 4 s and 30 s).
func (e *env) intentWindow() time.Duration {
	return min(30*time.Second, max(e.stale()/2, 4*time.Second))
}

// A zombie intent (a PUT that timed out and landed later) makes acquirers
// back off for at most the intent window, not the stale window.
func testZombieIntent(t *testing.T, e *env) {
	st := e.store(nil)
	z := e.foreign("pod-z")
	z.State, z.Epoch = lockadmin.StateIntent, 0
	e.putRecord(st, intentClaim(z.AcquisitionID), z)
	start := time.Now()
	l := e.acquire(st, e.opts("pod-a"))
	took := time.Since(start)
	if took < e.intentWindow()-e.slack() || took > e.intentWindow()+e.missed()+e.slack() {
		t.Fatalf("a zombie intent blocked the acquisition for %s; want about the intent window (%s), not the stale window", took, e.intentWindow())
	}
	// The release deletes what the acquisition found dead (docs/adr/0067).
	e.release(l)
	for _, n := range e.names(st) {
		if n == intentClaim(z.AcquisitionID) {
			t.Fatalf("the dead intent is still there after the release: %q", e.names(st))
		}
	}
}

// A confirm whose answer comes after the attempt's deadline is not trusted,
// even though the write lands later: the attempt starts over with a new
// claim, the holder deletes the zombie once it lands, and a second
// instance is refused by the one real holder.
func testLateConfirm(t *testing.T, e *env) {
	var mu sync.Mutex
	first := true
	slow := &late{Backend: e.b, delay: e.intentWindow(), match: func(key string) bool {
		mu.Lock()
		defer mu.Unlock()
		if strings.HasSuffix(key, "-2-held") && first {
			first = false
			return true
		}
		return false
	}}
	o := e.opts("pod-a")
	o.RequestTimeout = e.intentWindow() / 4
	a := e.acquire(e.store(slow), o)
	slow.wait()
	zombie := slow.landedKeys()
	if len(zombie) != 1 || strings.HasSuffix(zombie[0], heldClaim(a.Record().AcquisitionID)) {
		t.Fatalf("late writes %q; want one, of an earlier attempt than the holder's %s", zombie, a.Record().AcquisitionID)
	}
	st := e.store(nil)
	eventually(t, 2*e.heartbeat()+e.slack(), "the holder deletes the zombie confirm", func() bool {
		for _, n := range e.names(st) {
			if strings.HasSuffix(zombie[0], n) {
				return false
			}
		}
		return true
	})
	_, err := lock.Acquire(e.ctx(), st, e.opts("pod-b"))
	if he := wantHeld(t, err, "pod-a"); he.Holder.AcquisitionID != a.Record().AcquisitionID {
		t.Fatalf("refused by %s, want the one holder %s", he.Holder.AcquisitionID, a.Record().AcquisitionID)
	}
}

// Objects under the lock's prefix that the lock did not write are reported
// and judged as unreadable (by age), never trusted; a claim whose content
// disagrees with its name likewise.
func testForeignClaimNames(t *testing.T, e *env) {
	e.part(t, "UnknownName", func(t *testing.T, e *env) {
		st := e.storeRoot(nil, "unknown")
		e.put(st, ".lock.d/claim-not-a-uuid", []byte("x"))
		_, err := lock.Acquire(e.ctx(), st, e.opts("pod-a"))
		var he *lock.HeldError
		if !errors.As(err, &he) || he.Unreadable == "" {
			t.Fatalf("Acquire over a claim the lock did not write = %v, want an unreadable refusal", err)
		}
		if _, ok := e.logs.find("WARN", "name the lock does not write"); !ok {
			t.Fatalf("not reported:\n%s", e.logs.dump())
		}
	})
	e.part(t, "ContentDisagreesWithName", func(t *testing.T, e *env) {
		st := e.storeRoot(nil, "mismatch")
		rec := e.foreign("pod-a")
		e.putRecord(st, heldClaim(uuid.NewString()), rec) // rec carries another acquisition id
		_, err := lock.Acquire(e.ctx(), st, e.opts("pod-b"))
		var he *lock.HeldError
		if !errors.As(err, &he) || he.Unreadable == "" || !strings.Contains(he.Unreadable, "does not match its name") {
			t.Fatalf("Acquire over a mismatched claim = %v, want an unreadable refusal", err)
		}
	})
}

// A listing (or, in compare-and-swap mode, a read of the lock object)
// that fails is an error, never "no other claim": nothing is acquired and
// nothing is left behind.
func testListingError(t *testing.T, e *env) {
	st := e.store(e.f)
	a := e.acquire(e.store(nil), e.opts("pod-a"))
	e.f.SetHook(func(ctx context.Context, c fault.Call) error {
		if c.Op == fault.OpList || c.Op == fault.OpGet {
			return fault.ErrInjected
		}
		return nil
	})
	if l, err := lock.Acquire(e.ctx(), st, e.opts("pod-b")); err == nil {
		_ = l.Release(e.ctx())
		t.Fatal("acquired with every listing failing")
	} else if !errors.Is(err, fault.ErrInjected) {
		t.Fatalf("Acquire = %v, want the listing's error", err)
	}
	e.f.SetHook(nil)
	if s := e.status(e.store(nil)); s.Record.AcquisitionID != a.Record().AcquisitionID || len(s.Contenders) != 0 {
		t.Fatalf("after failed listings: %+v", s)
	}
}

// A holder that crashed right after confirming leaves its intent behind;
// the intent is superseded by the held claim, which is judged instead — it
// does not make acquirers back off for the intent window.
func testHolderIntentLeftBehind(t *testing.T, e *env) {
	st := e.store(nil)
	rec := e.foreign("pod-a")
	e.plant(st, rec)
	intent := rec
	intent.State, intent.Epoch = lockadmin.StateIntent, 0
	e.putRecord(st, intentClaim(rec.AcquisitionID), intent)
	// An intent window far longer than an acquisition takes on a loaded
	// machine (one took 5 s against a 4 s window on a debug Garage under
	// load): an acquirer that backed off on the intent would wait it out.
	o := e.opts("pod-b")
	o.IntentWindow = max(e.intentWindow(), 30*time.Second)
	_, err := lock.Acquire(e.ctx(), st, o)
	wantHeld(t, err, "pod-a") // refused by the held claim, not backed off by the intent
	eventually(t, 2*e.stale()+e.slack(), "the crashed holder's claim goes stale", func() bool { return e.status(st).Stale })
	start := time.Now()
	e.acquire(st, o)
	if took := time.Since(start); took >= o.IntentWindow {
		t.Fatalf("took %s: the crashed holder's intent blocked for the intent window (%s)", took, o.IntentWindow)
	}
}
