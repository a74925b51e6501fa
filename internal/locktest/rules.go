package locktest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/lockadmin"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/storemeta"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

func jsonRecord(r lock.Record) ([]byte, error) { return json.Marshal(r) }

func readRaw(t *testing.T, b backend.Backend, key string) []byte {
	t.Helper()
	rc, _, err := b.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("raw get %q: %v", key, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func testFreshAcquire(t *testing.T, e *env) {
	st := e.store(nil)
	l := e.acquire(st, e.opts("pod-a"))
	r := l.Record()
	if r.InstanceID != "pod-a" || r.Epoch != 1 || r.Mode != e.mode || r.State != lockadmin.StateHeld || r.AcquisitionID == "" || r.PID <= 0 || r.Hostname == "" {
		t.Fatalf("record = %+v", r)
	}
	if r.HeartbeatInterval != e.heartbeat() || r.StaleAfter != e.stale() {
		t.Fatalf("record windows = heartbeat %s, stale %s; want %s, %s", r.HeartbeatInterval, r.StaleAfter, e.heartbeat(), e.stale())
	}
	if l.Mode() != e.mode || l.Err() != nil {
		t.Fatalf("mode %s err %v", l.Mode(), l.Err())
	}
	s := e.status(st)
	if !s.Present || !s.Readable || s.Stale || s.Liveness != lockadmin.Live || s.Record.AcquisitionID != r.AcquisitionID || s.Record.Epoch != 1 || s.Mode != e.mode {
		t.Fatalf("status = %+v", s)
	}
	if s.Object != e.holderObject(r) {
		t.Fatalf("holder object %q, want %q", s.Object, e.holderObject(r))
	}
	// Sealed like all state: the raw object does not show the record.
	key, err := storeadmin.Key(storeadmin.Internal(st), s.Object)
	if err != nil {
		t.Fatal(err)
	}
	if raw := readRaw(t, e.b, key); strings.Contains(string(raw), "pod-a") || strings.Contains(string(raw), r.AcquisitionID) {
		t.Fatalf("the raw lock object shows its record in clear: %q", raw)
	}
	// The holder's object and one epoch marker: in compare-and-swap mode
	// the reservation of the first block (docs/adr/0066); in claims mode
	// the acquisition's, with its intent, kept until the release
	// (docs/adr/0067).
	got := e.names(st)
	var want []string
	if e.mode == lock.ModeCAS {
		want = []string{storemeta.LockName, marker(firstBlock)}
	} else {
		want = []string{intentClaim(r.AcquisitionID), heldClaim(r.AcquisitionID), marker(1)}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the lock's objects are %q, want %q", got, want)
	}
}

func testLiveForeign(t *testing.T, e *env) {
	st := e.store(nil)
	a := e.acquire(st, e.opts("pod-a"))
	_, err := lock.Acquire(e.ctx(), st, e.opts("pod-b"))
	he := wantHeld(t, err, "pod-a")
	if he.Duplicate || he.Holder.PID != a.Record().PID || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", a.Record().PID)) {
		t.Fatalf("refusal: %v (%+v)", err, he)
	}
	if he.StaleAfter != e.stale() || he.StaleIn <= 0 || he.HeartbeatAge >= e.stale() {
		t.Fatalf("refusal timings: %+v", he)
	}
	// The refused acquirer left nothing behind, and the holder never
	// noticed it.
	never(t, 2*e.heartbeat(), "the holder lost its lock to a refused acquirer", func() bool { return a.Err() != nil && !errors.Is(a.Err(), lock.ErrSuspended) || isLost(a) })
	if s := e.status(st); s.Record.AcquisitionID != a.Record().AcquisitionID || len(s.Contenders) != 0 {
		t.Fatalf("after the refusal: %+v", s)
	}
}

func testRefusalMessage(t *testing.T, e *env) {
	st := e.store(nil)
	rec := e.foreign("pod-a")
	info := e.plant(st, rec)
	_, err := lock.Acquire(e.ctx(), st, e.opts("pod-b"))
	wantHeld(t, err, "pod-a")
	msg := err.Error()
	for _, part := range []string{`state lock held by "pod-a" (pid 4242 on host elsewhere.example), last heartbeat `, " ago, stale after " + e.stale().String() + " (in "} {
		if !strings.Contains(msg, part) {
			t.Fatalf("message %q lacks %q", msg, part)
		}
	}
	if strings.Contains(msg, "refusing") {
		t.Fatalf("message %q carries a caller's wording; callers add their own", msg)
	}
	if v := e.version(st, e.holderObject(rec)); v != info.Version {
		t.Fatalf("the foreign lock was touched: version %s, was %s", v, info.Version)
	}
}

func wantDuplicate(t *testing.T, err error, holder string) *lock.HeldError {
	t.Helper()
	he := wantHeld(t, err, holder)
	if !he.Duplicate {
		t.Fatalf("refusal %v is not marked a duplicate", err)
	}
	for _, part := range []string{"another live process uses this instance id", "give each instance its own instance id"} {
		if !strings.Contains(err.Error(), part) {
			t.Fatalf("message %q lacks %q", err, part)
		}
	}
	return he
}

// Two processes with one id on one host (here: one process): the second is
// refused as a duplicate; the first keeps its lock and keeps writing.
func testDuplicateInProcess(t *testing.T, e *env) {
	st := e.store(nil)
	a := e.acquire(st, e.opts("pod-a"))
	_, err := lock.Acquire(e.ctx(), st, e.opts("pod-a"))
	wantDuplicate(t, err, "pod-a")
	fenced := a.Fence(st)
	deadline := time.Now().Add(3 * e.heartbeat())
	for time.Now().Before(deadline) {
		if isLost(a) {
			t.Fatalf("the first holder lost its lock to the duplicate: %v", a.Err())
		}
		if a.Err() == nil {
			// Under load a write can be refused by the fence (its lease
			// ran out before a heartbeat confirmed, or during the write):
			// that is the fence working, not the duplicate's doing. Never
			// for a lost lock.
			if _, err := fenced.Put(e.ctx(), "app", []byte("a"), store.PutOptions{}); err != nil && (!errors.Is(err, store.ErrFenced) || errors.Is(err, lock.ErrLost)) {
				t.Fatalf("the first holder's write failed: %v", err)
			}
		}
		time.Sleep(e.heartbeat() / 4)
	}
}

// Our instance id from a PID space we cannot probe (another host, another
// PID namespace) that keeps heartbeating: refused as a duplicate after
// watching it refresh, never taken over.
func testDuplicateElsewhere(t *testing.T, e *env) {
	st := e.store(nil)
	rec := e.foreign("pod-a")
	e.plant(st, rec)
	e.refresh(st, rec, e.heartbeat()/2)
	start := time.Now()
	_, err := lock.Acquire(e.ctx(), st, e.opts("pod-a"))
	wantDuplicate(t, err, "pod-a")
	if took := time.Since(start); took > 2*e.heartbeat()+e.slack() {
		t.Fatalf("the refusal took %s, more than two heartbeats", took)
	}
	if s := e.status(st); s.Record.AcquisitionID != rec.AcquisitionID {
		t.Fatalf("the live duplicate's lock was replaced: %+v", s.Record)
	}
}

// A crash-restart of ours in a new PID namespace (same hostname, so same
// default id): back after one heartbeat and a half of watching, long before
// the stale window.
func testCrashRestart(t *testing.T, e *env) {
	st := e.store(nil)
	rec := e.foreign("pod-a")
	e.plant(st, rec)
	start := time.Now()
	l := e.acquire(st, e.opts("pod-a"))
	took := time.Since(start)
	if took < e.missed() || took >= e.stale() {
		t.Fatalf("took over after %s, want between one heartbeat and a half (%s) and the stale window (%s)", took, e.missed(), e.stale())
	}
	if l.Record().Epoch != 8 {
		t.Fatalf("epoch %d, want 8", l.Record().Epoch)
	}
	if _, ok := e.logs.find("missed a heartbeat"); !ok {
		t.Fatalf("no takeover log naming the missed heartbeat:\n%s", e.logs.dump())
	}
}

func testStaleTakeover(t *testing.T, e *env) {
	st := e.store(nil)
	rec := e.foreign("pod-a")
	e.plant(st, rec)
	if _, err := lock.Acquire(e.ctx(), st, e.opts("pod-b")); !errors.Is(err, lock.ErrHeld) {
		t.Fatalf("fresh foreign lock: %v, want ErrHeld", err)
	}
	eventually(t, 2*e.stale()+e.slack(), "the lock goes stale", func() bool { return e.status(st).Stale })
	b := e.acquire(st, e.opts("pod-b"))
	if r := b.Record(); r.InstanceID != "pod-b" || r.Epoch != 8 {
		t.Fatalf("record after stale takeover = %+v, want pod-b epoch 8", r)
	}
	if _, ok := e.logs.find("taken over", "stale"); !ok {
		t.Fatalf("no takeover log:\n%s", e.logs.dump())
	}
	// The stale holder's claim is cleaned up.
	eventually(t, e.stale(), "the stale holder's object is gone or replaced", func() bool {
		for _, n := range e.names(st) {
			if n == heldClaim(rec.AcquisitionID) {
				return false
			}
		}
		return true
	})
}

// ourProcess returns the PID, start and scope this process writes, read
// from a real acquisition.
func ourProcess(t *testing.T, e *env) lock.Record {
	st := e.storeRoot(nil, "probe")
	l := e.acquire(st, e.opts("probe"))
	r := l.Record()
	if err := l.Release(e.ctx()); err != nil {
		t.Fatal(err)
	}
	if r.ProcessScope == "" || r.ProcessStartTicks == 0 {
		t.Skip("this platform does not record process start ticks and PID scopes; PIDs are not probed")
	}
	return r
}

func testDeadPID(t *testing.T, e *env) {
	self := ourProcess(t, e)
	local := func(id string) lock.Record {
		rec := e.foreign(id)
		rec.Hostname, rec.ProcessScope, rec.ProcessStartTicks, rec.ProcessStart = self.Hostname, self.ProcessScope, self.ProcessStartTicks, self.ProcessStart
		return rec
	}
	e.part(t, "Dead", func(t *testing.T, e *env) {
		st := e.storeRoot(nil, "dead")
		rec := local("pod-a")
		rec.PID = 1<<30 + 7 // beyond any pid_max: no such process
		e.plant(st, rec)
		b := e.acquire(st, e.opts("pod-a")) // our own id too: a dead one is taken at once
		if b.Record().Epoch != 8 {
			t.Fatalf("epoch %d, want 8", b.Record().Epoch)
		}
	})
	e.part(t, "Reused", func(t *testing.T, e *env) {
		st := e.storeRoot(nil, "reused")
		rec := local("pod-a")
		rec.PID, rec.ProcessStartTicks = self.PID, self.ProcessStartTicks-1 // our PID, another process
		e.plant(st, rec)
		e.acquire(st, e.opts("pod-b"))
	})
	e.part(t, "AliveIsRefused", func(t *testing.T, e *env) {
		st := e.storeRoot(nil, "alive")
		rec := local("pod-a")
		rec.PID = self.PID
		e.plant(st, rec)
		_, err := lock.Acquire(e.ctx(), st, e.opts("pod-b"))
		wantHeld(t, err, "pod-a")
	})
	e.part(t, "OtherScopeNotProbed", func(t *testing.T, e *env) {
		st := e.storeRoot(nil, "other-scope")
		rec := local("pod-a")
		rec.PID, rec.ProcessScope = 1<<30+7, "another-boot/pid:[1]"
		e.plant(st, rec)
		_, err := lock.Acquire(e.ctx(), st, e.opts("pod-b"))
		wantHeld(t, err, "pod-a")
	})
}

// unreadableKinds are the ways a lock object fails to open: another key,
// not a lock record, an epoch of 0, not sealed at all.
func (e *env) unreadableKinds() []struct {
	name  string
	write func(st *store.Store, rec lock.Record) string
} {
	return []struct {
		name  string
		write func(st *store.Store, rec lock.Record) string
	}{
		{"SealedToAnotherKey", func(st *store.Store, rec lock.Record) string {
			e.plant(e.otherKeyStore(st), rec)
			return e.holderObject(rec)
		}},
		{"NotALockRecord", func(st *store.Store, rec lock.Record) string {
			e.put(st, e.holderObject(rec), []byte("{not json"))
			return e.holderObject(rec)
		}},
		{"EpochZero", func(st *store.Store, rec lock.Record) string {
			rec.Epoch = 0 // no acquisition writes it: counting on would repeat an epoch
			e.putRecord(st, e.holderObject(rec), rec)
			return e.holderObject(rec)
		}},
		{"NotSealed", func(st *store.Store, rec lock.Record) string {
			key, err := storeadmin.Key(storeadmin.Internal(st), e.holderObject(rec))
			if err != nil {
				t := e.t
				t.Fatal(err)
			}
			if _, err := storeadmin.Backend(st).Put(e.ctx(), key, []byte("garbage, not an envelope"), backend.PutOptions{}); err != nil {
				e.t.Fatal(err)
			}
			return e.holderObject(rec)
		}},
	}
}

func testUnreadable(t *testing.T, e *env) {
	for _, c := range e.unreadableKinds() {
		e.part(t, c.name, func(t *testing.T, e *env) {
			st := e.storeRoot(nil, "unreadable-"+c.name)
			e.put(st, marker(7), []byte(`{"epoch":7}`)) // its acquisition's marker
			name := c.write(st, e.foreign("pod-a"))
			before := e.version(st, name)
			s := e.status(st)
			if !s.Present || s.Readable || s.Unreadable == "" || s.Liveness != lockadmin.Unreadable {
				t.Fatalf("status of a fresh unreadable lock = %+v", s)
			}
			_, err := lock.Acquire(e.ctx(), st, e.opts("pod-b"))
			var he *lock.HeldError
			if !errors.As(err, &he) || he.Unreadable == "" || !strings.Contains(err.Error(), "held by an instance whose key this process does not hold") {
				t.Fatalf("fresh unreadable lock: %v, want a refusal saying whose key", err)
			}
			if e.version(st, name) != before {
				t.Fatal("the refused acquirer touched the unreadable lock")
			}
			// Nothing in it confirms the storage's clock: it is taken over
			// once watched unchanged for the stale window (ADR 0028).
			o := e.opts("pod-b")
			o.WaitForStale = true
			start := time.Now()
			l := e.acquire(st, o)
			if took := time.Since(start); took < e.stale()-e.slack() {
				t.Fatalf("an unreadable lock was taken over after %s of watching, less than the stale window %s", took, e.stale())
			}
			if l.Record().Epoch != 8 {
				t.Fatalf("epoch %d after taking over an unreadable lock whose marker was 7, want 8", l.Record().Epoch)
			}
			if _, ok := e.logs.find("WARN", "unreadable"); !ok {
				t.Fatalf("no warning logged for an unreadable takeover:\n%s", e.logs.dump())
			}
		})
	}
}

// A forward step of the storage clock makes a live holder's lock look old:
// it is watched for a heartbeat, refreshes, and is refused, not taken over.
func testClockForward(t *testing.T, e *env) {
	holder := e.store(nil)
	a := e.acquire(holder, e.opts("pod-a"))
	_, err := lock.Acquire(e.ctx(), e.store(&stepped{Backend: e.b, d: time.Hour}), e.opts("pod-b"))
	wantHeld(t, err, "pod-a")
	if isLost(a) || e.status(holder).Record.AcquisitionID != a.Record().AcquisitionID {
		t.Fatalf("the live holder was thrown out by a clock step: %v", a.Err())
	}
	if _, ok := e.logs.find("watching the lock"); !ok {
		t.Fatalf("the acquirer did not watch the lock before refusing:\n%s", e.logs.dump())
	}
}

// A backward step makes every age negative: a dead holder's lock is not
// stranded for the size of the step, but taken over after the stale window
// of watching; without waiting it is refused, saying the age is unknown.
func testClockBackward(t *testing.T, e *env) {
	st := e.store(nil)
	rec := e.foreign("pod-b")
	e.plant(st, rec) // never refreshed: its holder is gone
	skewed := e.store(&stepped{Backend: e.b, d: -time.Hour})
	_, err := lock.Acquire(e.ctx(), skewed, e.opts("pod-c"))
	he := wantHeld(t, err, "pod-b")
	if !he.ClockAnomaly || !strings.Contains(err.Error(), "ahead of the storage's clock") || he.StaleIn <= 0 || he.StaleIn > e.stale() {
		t.Fatalf("refusal under a backward clock step: %v (%+v)", err, he)
	}
	o := e.opts("pod-c")
	o.WaitForStale = true
	start := time.Now()
	l := e.acquire(skewed, o)
	if took := time.Since(start); took < e.stale()-e.slack() || took > 2*e.stale()+e.slack() {
		t.Fatalf("took over after %s, want about the stale window (%s) of watching", took, e.stale())
	}
	if l.Record().Epoch != 8 {
		t.Fatalf("epoch %d, want 8", l.Record().Epoch)
	}
}

// Instances whose clocks disagree with the storage's agree with each other:
// staleness is judged on the storage's clock.
func testSkewedClock(t *testing.T, e *env) {
	e.f.SetClockSkew(-2 * e.stale()) // every instance sees the same storage
	st := e.store(e.f)
	a := e.acquire(st, e.opts("pod-a"))
	_, err := lock.Acquire(e.ctx(), st, e.opts("pod-b"))
	wantHeld(t, err, "pod-a")
	if err := a.Release(e.ctx()); err != nil {
		t.Fatal(err)
	}
	rec := e.foreign("pod-a")
	e.plant(st, rec)
	eventually(t, 2*e.stale()+e.slack(), "the planted lock goes stale on the storage's clock", func() bool { return e.status(st).Stale })
	e.acquire(st, e.opts("pod-b"))
}

// A server that claims conditional writes but ignores them (compare-and-swap
// mode): the serial rules still hold — a live holder is refused and never
// thrown out, a release deletes only its own lock.
func testIgnoredConditions(t *testing.T, e *env) {
	e.f.SetIgnoreConditions(true)
	st := e.store(e.f)
	a := e.acquire(st, e.opts("pod-a"))
	_, err := lock.Acquire(e.ctx(), st, e.opts("pod-b"))
	wantHeld(t, err, "pod-a")
	if err := a.Release(e.ctx()); err != nil {
		t.Fatal(err)
	}
	b := e.acquire(st, e.opts("pod-b"))
	if b.Record().Epoch != 2 {
		t.Fatalf("epoch %d, want 2", b.Record().Epoch)
	}
}
