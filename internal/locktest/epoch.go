package locktest

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/cairnhq/state/internal/lockadmin"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/storemeta"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

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

func testEpochAcrossRelease(t *testing.T, e *env) {
	st := e.store(nil)
	for i, id := range []string{"pod-a", "pod-b", "pod-a"} {
		l := e.acquire(st, e.opts(id))
		wantEpoch(t, l, uint64(i+1), fmt.Sprintf("acquisition %d by %s", i+1, id))
		e.release(l)
	}
	if s := e.status(st); s.Present || s.Epoch != 3 {
		t.Fatalf("after three releases: %+v", s)
	}
}

func testEpochAcrossBreak(t *testing.T, e *env) {
	e.part(t, "Readable", func(t *testing.T, e *env) {
		st := e.storeRoot(nil, "readable")
		a := e.acquire(st, e.opts("pod-a"))
		b := e.takeOver(st, a) // Break writes marker 2, so the next is 3
		if b.Record().Epoch <= a.Record().Epoch {
			t.Fatalf("epoch %d after a break of %d", b.Record().Epoch, a.Record().Epoch)
		}
	})
	e.part(t, "UnreadableForced", func(t *testing.T, e *env) {
		st := e.storeRoot(nil, "unreadable")
		rec := e.foreign("pod-x")
		rec.Epoch = 41
		e.plant(e.otherKeyStore(st), rec)
		if _, err := lockadmin.Break(e.ctx(), st, lockadmin.BreakOptions{Force: true, StaleAfter: e.stale()}); err != nil {
			t.Fatalf("forced break of an unreadable lock: %v", err)
		}
		l := e.acquire(st, e.opts("pod-b"))
		if l.Record().Epoch <= 41 {
			t.Fatalf("epoch %d after breaking an unreadable lock at epoch 41 (ADR 0008 went back to 1)", l.Record().Epoch)
		}
	})
}

// An out-of-band delete of the holder's object (by hand, a bucket policy)
// does not make two holders share an epoch: the markers remember. The
// holder is stalled meanwhile (a live holder in claims mode would write its
// claim back at its next heartbeat, and keep the lock).
func testEpochOutOfBandDelete(t *testing.T, e *env) {
	a := e.acquire(e.store(e.f), e.opts("pod-a"))
	resume := e.f.Stall()
	defer resume()
	st := e.store(nil)
	if err := storeadmin.Internal(st).Delete(e.ctx(), e.holderObject(a.Record()), store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	b := e.acquire(st, e.opts("pod-b"))
	if b.Record().Epoch <= a.Record().Epoch {
		t.Fatalf("epoch %d after an out-of-band delete of epoch %d", b.Record().Epoch, a.Record().Epoch)
	}
	resume()
	eventually(t, 2*e.stale()+e.slack(), "the first holder learns it lost", func() bool { return isLost(a) })
}

// An instance with another key took the lock three times; ours takes it
// over once stale and counts on (ADR 0008 went 3 → 1).
func testEpochUnreadableTakeover(t *testing.T, e *env) {
	st := e.store(nil)
	other := e.otherKeyStore(st)
	for range 3 {
		e.release(e.acquire(other, e.opts("pod-other")))
	}
	rec := e.foreign("pod-other")
	rec.Epoch = 4
	e.plant(other, rec) // a fourth acquisition, then its process died
	o := e.opts("pod-b")
	o.WaitForStale = true // watched for the stale window: it does not open here
	l := e.acquire(st, o)
	if e.mode == lock.ModeCAS {
		// Counted on from the markers: the next block's first epoch
		// (docs/adr/0066).
		if l.Record().Epoch <= 4 {
			t.Fatalf("epoch %d after taking over another key's lock at epoch 4", l.Record().Epoch)
		}
		return
	}
	wantEpoch(t, l, 5, "after taking over another key's lock at epoch 4")
}

// An out-of-band delete of a released lock object (nobody holds it) does
// not bring an epoch back: the next acquisition counts on from the
// markers, past the block the lost record was in.
func testEpochOutOfBandDeleteReleased(t *testing.T, e *env) {
	st := e.store(nil)
	a := e.acquire(st, e.opts("pod-a"))
	e.release(a)
	b := e.acquire(st, e.opts("pod-b"))
	e.release(b)
	if err := storeadmin.Internal(st).Delete(e.ctx(), storemeta.LockName, store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c := e.acquire(st, e.opts("pod-c"))
	if c.Record().Epoch <= b.Record().Epoch {
		t.Fatalf("epoch %d after an out-of-band delete of a lock released at %d", c.Record().Epoch, b.Record().Epoch)
	}
	e.release(c)
	if d := e.acquire(st, e.opts("pod-d")); d.Record().Epoch != c.Record().Epoch+1 {
		t.Fatalf("epoch %d after %d", d.Record().Epoch, c.Record().Epoch)
	}
}

// An acquisition past its block's ceiling reserves the next block (its
// marker created, the old one deleted); one whose next block another
// acquisition owns reserves above the highest marker (docs/adr/0066).
func testEpochAcrossBlocks(t *testing.T, e *env) {
	e.part(t, "NextBlock", func(t *testing.T, e *env) {
		st := e.storeRoot(nil, "next")
		rec := e.foreign("pod-x")
		rec.State, rec.Epoch, rec.Ceiling = lockadmin.StateReleased, firstBlock, firstBlock
		e.put(st, marker(firstBlock), []byte(`{}`))
		e.putRecord(st, storemeta.LockName, rec)
		l := e.acquire(st, e.opts("pod-a"))
		wantEpoch(t, l, firstBlock+1, "past the first block")
		if l.Record().Ceiling != 2*firstBlock {
			t.Fatalf("ceiling %d, want %d", l.Record().Ceiling, 2*firstBlock)
		}
		eventually(t, e.stale(), "the old block's marker is deleted", func() bool {
			got := e.names(st)
			return len(got) == 2 && got[1] == marker(2*firstBlock)
		})
	})
	e.part(t, "NextBlockTaken", func(t *testing.T, e *env) {
		st := e.storeRoot(nil, "taken")
		rec := e.foreign("pod-x")
		rec.State, rec.Epoch, rec.Ceiling = lockadmin.StateReleased, firstBlock, firstBlock
		e.put(st, marker(firstBlock), []byte(`{}`))
		e.put(st, marker(2*firstBlock), []byte(`{}`)) // another's reservation
		e.putRecord(st, storemeta.LockName, rec)
		l := e.acquire(st, e.opts("pod-a"))
		wantEpoch(t, l, 2*firstBlock+1, "past a block another acquisition reserved")
	})
}

func testEpochOverflow(t *testing.T, e *env) {
	st := e.store(nil)
	e.put(st, marker(math.MaxUint64), []byte(`{}`))
	_, err := lock.Acquire(e.ctx(), st, e.opts("pod-a"))
	if !errors.Is(err, lock.ErrEpochExhausted) || !strings.Contains(err.Error(), marker(math.MaxUint64)) {
		t.Fatalf("Acquire over an epoch marker of 2^64-1 = %v, want ErrEpochExhausted naming the marker", err)
	}
	if got := e.names(st); len(got) != 1 {
		t.Fatalf("the refused acquisition wrote %q", got)
	}
}
