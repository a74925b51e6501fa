package locktest

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/lockadmin"
	"github.com/cairnhq/state/lock"
)

func testInspect(t *testing.T, e *env) {
	e.part(t, "Free", func(t *testing.T, e *env) {
		s := e.status(e.storeRoot(nil, "free"))
		if s.Present || !strings.Contains(s.NextBoot, "at once") {
			t.Fatalf("status of no lock = %+v", s)
		}
	})
	e.part(t, "Live", func(t *testing.T, e *env) {
		st := e.storeRoot(nil, "live")
		l := e.acquire(st, e.opts("pod-a"))
		s := e.status(st)
		if !s.Present || s.Liveness != lockadmin.Live || s.Stale || s.Record.AcquisitionID != l.Record().AcquisitionID || !strings.Contains(s.NextBoot, "refuse") {
			t.Fatalf("status of a live lock = %+v", s)
		}
	})
	e.part(t, "Stale", func(t *testing.T, e *env) {
		st := e.storeRoot(nil, "stale")
		e.plant(st, e.foreign("pod-a"))
		eventually(t, 2*e.stale()+e.slack(), "Inspect reports the lock stale", func() bool {
			s := e.status(st)
			return s.Stale && s.Liveness == lockadmin.Stale && strings.Contains(s.NextBoot, "at once")
		})
	})
	e.part(t, "DeadOnThisHost", func(t *testing.T, e *env) {
		self := ourProcess(t, e)
		st := e.storeRoot(nil, "dead")
		rec := e.foreign("pod-a")
		rec.Hostname, rec.ProcessScope, rec.ProcessStartTicks, rec.PID = self.Hostname, self.ProcessScope, self.ProcessStartTicks, 1<<30+7
		e.plant(st, rec)
		s := e.status(st)
		if s.Liveness != lockadmin.Dead || !strings.Contains(s.NextBoot, "take it over at once") {
			t.Fatalf("status of a dead holder's lock = %+v (a SIGKILLed holder must not read as live)", s)
		}
	})
	e.part(t, "Unreadable", func(t *testing.T, e *env) {
		st := e.storeRoot(nil, "unreadable")
		e.plant(e.otherKeyStore(st), e.foreign("pod-a"))
		s := e.status(st)
		if !s.Present || s.Readable || s.Liveness != lockadmin.Unreadable || s.Unreadable == "" || !strings.Contains(s.NextBoot, "does not open") {
			t.Fatalf("status of an unreadable lock = %+v", s)
		}
	})
	if e.mode == lock.ModeClaims {
		e.part(t, "Contenders", func(t *testing.T, e *env) {
			st := e.storeRoot(nil, "contenders")
			l := e.acquire(st, e.opts("pod-a"))
			intent := e.foreign("pod-c")
			intent.State, intent.Epoch = lockadmin.StateIntent, 0
			e.putRecord(st, intentClaim(intent.AcquisitionID), intent)
			s := e.status(st)
			if s.Record.AcquisitionID != l.Record().AcquisitionID || len(s.Contenders) != 1 ||
				s.Contenders[0].State != lockadmin.StateIntent || s.Contenders[0].Record.InstanceID != "pod-c" || !s.Contenders[0].Live {
				t.Fatalf("status with a contender = %+v", s)
			}
		})
	}
}

func testBreak(t *testing.T, e *env) {
	e.part(t, "NoLock", func(t *testing.T, e *env) {
		if _, err := lockadmin.Break(e.ctx(), e.storeRoot(nil, "none"), lockadmin.BreakOptions{}); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("Break of no lock = %v, want ErrNotFound", err)
		}
	})
	e.part(t, "Live", func(t *testing.T, e *env) {
		// A heartbeat between the break's read and its conditional delete
		// makes the break refuse ("changed since it was inspected"), as
		// it must; a long heartbeat keeps one out of this part.
		st := e.storeRoot(nil, "live")
		oa := e.opts("pod-a")
		oa.HeartbeatInterval = e.stale() / 2
		a := e.acquire(st, oa)
		for _, o := range []lockadmin.BreakOptions{
			{StaleAfter: e.stale()},
			{Holder: "pod-a", StaleAfter: e.stale()},
			{Force: true, StaleAfter: e.stale()},
			{Force: true, Holder: "pod-b", StaleAfter: e.stale()},
		} {
			if _, err := lockadmin.Break(e.ctx(), st, o); !errors.Is(err, lock.ErrHeld) || !strings.Contains(err.Error(), `"pod-a"`) {
				t.Fatalf("Break(%+v) of a live lock = %v, want a refusal naming pod-a", o, err)
			}
		}
		if a.Err() != nil || e.status(st).Record.AcquisitionID != a.Record().AcquisitionID {
			t.Fatal("a refused break touched the lock")
		}
		r, err := lockadmin.Break(e.ctx(), st, lockadmin.BreakOptions{Force: true, Holder: "pod-a", StaleAfter: e.stale()})
		if err != nil || r.AcquisitionID != a.Record().AcquisitionID {
			t.Fatalf("forced break = %+v, %v", r, err)
		}
		if e.mode == lock.ModeCAS {
			// A released record in the holder's place, at its epoch
			// (docs/adr/0066).
			if s := e.status(st); s.Present || !s.Readable || s.Record.State != lockadmin.StateReleased || s.Record.AcquisitionID == r.AcquisitionID || s.Epoch != r.Epoch {
				t.Fatalf("after a forced break the lock object is %+v, want a released record at epoch %d", s, r.Epoch)
			}
			if _, err := lockadmin.Break(e.ctx(), st, lockadmin.BreakOptions{Force: true, StaleAfter: e.stale()}); !errors.Is(err, backend.ErrNotFound) {
				t.Fatalf("Break of a released lock = %v, want ErrNotFound", err)
			}
		}
		eventually(t, 2*oa.HeartbeatInterval+e.slack(), "the broken holder learns it", func() bool { return isLost(a) })
		// A heartbeat of a's in flight at the break can write its claim
		// back (claims mode; seen on the Garage cluster): a, having
		// learned the break, deletes that claim (see takeOver).
		eventually(t, 2*oa.HeartbeatInterval+e.slack(), "the lock is gone after the break", func() bool { return !e.status(st).Present })
	})
	e.part(t, "Stale", func(t *testing.T, e *env) {
		st := e.storeRoot(nil, "stale")
		e.plant(st, e.foreign("pod-a"))
		eventually(t, 2*e.stale()+e.slack(), "the lock goes stale", func() bool { return e.status(st).Stale })
		if _, err := lockadmin.Break(e.ctx(), st, lockadmin.BreakOptions{StaleAfter: e.stale()}); err != nil {
			t.Fatalf("Break of a stale lock = %v", err)
		}
	})
	e.part(t, "UnreadableLive", func(t *testing.T, e *env) {
		st := e.storeRoot(nil, "unreadable")
		e.plant(e.otherKeyStore(st), e.foreign("pod-a"))
		for _, o := range []lockadmin.BreakOptions{{StaleAfter: e.stale()}, {Force: true, Holder: "pod-a", StaleAfter: e.stale()}} {
			if _, err := lockadmin.Break(e.ctx(), st, o); !errors.Is(err, lock.ErrHeld) {
				t.Fatalf("Break(%+v) of a live unreadable lock = %v, want a refusal", o, err)
			}
		}
		if _, err := lockadmin.Break(e.ctx(), st, lockadmin.BreakOptions{Force: true, StaleAfter: e.stale()}); err != nil {
			t.Fatalf("forced break of an unreadable lock: %v", err)
		}
	})
	_ = uuid.Nil
}
