// Package locktest is the conformance suite of the instance lock: every rule
// of package lock, run against a backend supplied by a [Harness] and against
// that backend wrapped in faults (a create that lands but answers 412, a
// server that ignores conditions, a skewed storage clock, a stalled or
// unreachable storage). Each backend's test calls [Run]:
//
//	func TestLock_Mem(t *testing.T) {
//		locktest.Run(t, locktest.Harness{
//			NewBackend: func(t *testing.T) backend.Backend { return mem.New(mem.Options{}) },
//		})
//	}
//
// Timings scale with Harness.StaleAfter, so a backend with second-resolution
// timestamps (S3) runs the same cases with a longer horizon.
package locktest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/fault"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// Harness supplies the backend under test.
type Harness struct {
	// NewBackend returns a new, empty backend (a fresh bucket or
	// directory). The suite calls it once per case.
	NewBackend func(t *testing.T) backend.Backend
	// StaleAfter is the stale horizon the suite uses; heartbeats run at a
	// quarter of it. It must be several times the backend's timestamp
	// resolution plus request latency. Zero means 600ms, which suits an
	// in-memory backend; S3 servers (one-second timestamps) need about 4s.
	StaleAfter time.Duration
	// RaceTrials is how many trials of 8 concurrent acquirers the race
	// case runs; zero means 50.
	RaceTrials int
}

// Run runs the whole suite as subtests of t.
func Run(t *testing.T, h Harness) {
	if h.StaleAfter == 0 {
		h.StaleAfter = 600 * time.Millisecond
	}
	if h.RaceTrials == 0 {
		h.RaceTrials = 50
	}
	cases := []struct {
		name string
		fn   func(*testing.T, *env)
	}{
		{"FreshAcquire_WritesSealedRecord", testFreshAcquire},
		{"LiveForeignHolder_RefusesAndNamesHolder", testLiveForeign},
		{"LiveForeignRecord_MessageNamesHolderPIDAgeAndHorizon", testLiveForeignMessage},
		{"StaleLock_TakenOver", testStaleTakeover},
		{"OwnInstanceID_TakenOverAtOnce", testOwnLock},
		{"SameHostDeadPID_TakenOverAtOnce", testDeadPID},
		{"SameHostReusedPID_TakenOverAtOnce", testReusedPID},
		{"UnreadableLock_TakenOverWithWarning", testUnreadable},
		{"Release_DeletesLockAndFences", testRelease},
		{"HeartbeatFindsOtherHolder_ReportsLoss", testLossDetected},
		{"ReleaseAfterLoss_LeavesNewHolderAlone", testReleaseAfterLoss},
		{"PausedPastHorizon_LosesAndWritesRefused", testPausedHolder},
		{"BriefOutage_HeartbeatRecovers", testBriefOutage},
		{"LostCreateAck_StillAcquired", testLostCreateAck},
		{"LostHeartbeatAck_StillHeld", testLostHeartbeatAck},
		{"SkewedStorageClock_JudgedOnStorageClock", testSkewedClock},
		{"ServerIgnoresConditions_SerialRulesHold", testIgnoredConditions},
		{"WaitForStale_WaitsThenTakesOver", testWaitForStale},
		{"Inspect_ReportsHolderAndStaleness", testInspect},
		{"Break_StaleRemovedLiveOnlyForcedWithHolder", testBreak},
		{"UnreadableLock_JudgedByAgeForOperators", testUnreadableLiveForOperators},
		{"Refusal_EndsWithTheCallersWording", testRefusalWording},
		{"HolderStaleWindow_LongerOneWins", testHolderStaleWindow},
		{"EpochGrows_AcrossReleaseAndReacquire", testEpochAcrossRelease},
		{"EpochGrows_AcrossBreak", testEpochAcrossBreak},
		{"EpochGrows_AcrossStaleTakeover", testEpochAcrossStaleTakeover},
		{"EpochSave_NeverLowersAndFailureLeavesLock", testEpochNeverLowered},
		{"GarbageEpochObject_BootsWithWarning", testGarbageEpoch},
		{"RequestCounts", testRequestCounts},
		{"ConcurrentAcquirers_RaceTrials", testRace},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.fn(t, newEnv(t, h))
		})
	}
}

// env is one case's world: a backend, a fault wrapper over it, a sealer
// shared by every instance, and a log recorder.
type env struct {
	t      *testing.T
	h      Harness
	b      backend.Backend // the backend under test
	f      *fault.Backend  // b wrapped; faults off until a case turns them on
	sealer store.Sealer
	logs   *logRecorder
	cas    bool
}

func newEnv(t *testing.T, h Harness) *env {
	s, err := newAgeSealer()
	if err != nil {
		t.Fatal(err)
	}
	b := h.NewBackend(t)
	return &env{t: t, h: h, b: b, f: fault.New(b), sealer: s, logs: newLogRecorder(t), cas: b.Capabilities().ConditionalWrites}
}

func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*e.h.StaleAfter+30*time.Second)
	e.t.Cleanup(cancel)
	return ctx
}

// store opens a store over b (e.b when nil) sealed with the shared sealer.
func (e *env) store(b backend.Backend) *store.Store {
	e.t.Helper()
	return e.storeRoot(b, "")
}

func (e *env) storeRoot(b backend.Backend, root string) *store.Store {
	e.t.Helper()
	if b == nil {
		b = e.b
	}
	st, err := store.Open(b, e.sealer, store.Options{Root: root, Logger: slog.New(e.logs)})
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

func (e *env) opts(id string) lock.Options {
	return lock.Options{
		InstanceID:        id,
		StaleAfter:        e.h.StaleAfter,
		HeartbeatInterval: e.h.StaleAfter / 4,
		SettleDelay:       e.h.StaleAfter / 8,
		Logger:            slog.New(e.logs).With("test_instance", id),
	}
}

// acquire takes the lock or fails the test; the lock is released when the
// test ends, so that no heartbeat outlives it.
func (e *env) acquire(st *store.Store, o lock.Options) *lock.Lock {
	e.t.Helper()
	l, err := lock.Acquire(e.ctx(), st, o)
	if err != nil {
		e.t.Fatalf("Acquire(%s): %v\nlogs:\n%s", o.InstanceID, err, e.logs.dump())
	}
	e.t.Cleanup(func() { _ = l.Release(context.Background()) })
	return l
}

// writeRecord puts rec as the lock object, as another instance would.
func (e *env) writeRecord(st *store.Store, rec lock.Record) store.Info {
	e.t.Helper()
	data, err := jsonRecord(rec)
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := st.Internal().Put(e.ctx(), lock.Name, data, store.PutOptions{})
	if err != nil {
		e.t.Fatalf("write lock record: %v", err)
	}
	return info
}

func (e *env) status(st *store.Store) lock.Status {
	e.t.Helper()
	s, err := lock.Inspect(e.ctx(), st, e.h.StaleAfter)
	if err != nil {
		e.t.Fatalf("Inspect: %v", err)
	}
	return s
}

// waitStale polls until the lock of st is stale on the storage's clock
// (whose one-second timestamps, on S3, make "stale" come up to a second
// early or late).
func (e *env) waitStale(st *store.Store) {
	e.t.Helper()
	eventually(e.t, 2*e.h.StaleAfter+2*time.Second, "the lock goes stale", func() bool { return e.status(st).Stale })
}

// foreign is a record of a live holder on another host.
func foreign(id string) lock.Record {
	now := time.Now().UTC()
	return lock.Record{
		InstanceID: id, Hostname: "elsewhere.example", PID: 4242,
		AcquiredAt: now, Heartbeat: now, Epoch: 7, Mode: lock.ModeCAS,
		AcquisitionID: "acq-" + id,
	}
}

func (e *env) mode() lock.Mode {
	if e.cas {
		return lock.ModeCAS
	}
	return lock.ModeAdvisory
}

// eventually polls cond every few milliseconds until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func wantHeld(t *testing.T, err error, holder string) *lock.HeldError {
	t.Helper()
	var he *lock.HeldError
	if !errors.As(err, &he) || !errors.Is(err, lock.ErrHeld) {
		t.Fatalf("err = %v, want a *HeldError", err)
	}
	if he.Holder.InstanceID != holder {
		t.Fatalf("HeldError names %q, want %q", he.Holder.InstanceID, holder)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("%q", holder)) {
		t.Fatalf("message %q does not name the holder %q", err, holder)
	}
	return he
}

func testFreshAcquire(t *testing.T, e *env) {
	st := e.store(nil)
	l := e.acquire(st, e.opts("pod-a"))
	r := l.Record()
	if r.InstanceID != "pod-a" || r.Epoch != 1 || r.Mode != e.mode() || r.AcquisitionID == "" || r.PID <= 0 || r.Hostname == "" {
		t.Fatalf("record = %+v", r)
	}
	if l.Mode() != e.mode() || l.Err() != nil {
		t.Fatalf("mode %s err %v", l.Mode(), l.Err())
	}
	s := e.status(st)
	if !s.Present || !s.Readable || s.Stale || s.Record.AcquisitionID != r.AcquisitionID {
		t.Fatalf("status = %+v", s)
	}
	// Sealed like all state: the raw object does not show the record.
	key, err := st.Internal().Key(lock.Name)
	if err != nil {
		t.Fatal(err)
	}
	raw := readRaw(t, e.b, key)
	if strings.Contains(string(raw), "pod-a") || strings.Contains(string(raw), r.AcquisitionID) {
		t.Fatalf("the raw lock object shows its record in clear: %q", raw)
	}
}

func testLiveForeign(t *testing.T, e *env) {
	st := e.store(nil)
	a := e.acquire(st, e.opts("pod-a"))
	before, err := st.Internal().Stat(e.ctx(), lock.Name)
	if err != nil {
		t.Fatal(err)
	}
	_, err = lock.Acquire(e.ctx(), st, e.opts("pod-b"))
	he := wantHeld(t, err, "pod-a")
	if he.Holder.PID != a.Record().PID || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", a.Record().PID)) {
		t.Fatalf("refusal does not name the holder's pid: %v", err)
	}
	if he.StaleAfter != e.h.StaleAfter || he.StaleIn <= 0 || he.HeartbeatAge >= e.h.StaleAfter {
		t.Fatalf("refusal timings: %+v", he)
	}
	after, err := st.Internal().Stat(e.ctx(), lock.Name)
	if err != nil {
		t.Fatal(err)
	}
	if after.Version != before.Version {
		// Only the holder's own heartbeat may have written meanwhile.
		if s := e.status(st); s.Record.AcquisitionID != a.Record().AcquisitionID {
			t.Fatalf("the refused acquirer touched the lock: %+v", s.Record)
		}
	}
	if a.Err() != nil {
		t.Fatalf("holder lost its lock: %v", a.Err())
	}
}

func testLiveForeignMessage(t *testing.T, e *env) {
	st := e.store(nil)
	rec := foreign("pod-a")
	info := e.writeRecord(st, rec)
	_, err := lock.Acquire(e.ctx(), st, e.opts("pod-b"))
	wantHeld(t, err, "pod-a")
	msg := err.Error()
	for _, part := range []string{`state lock held by "pod-a" (pid 4242), last heartbeat `, " ago, stale after " + e.h.StaleAfter.String() + " (in ", "): another instance is using this store; refusing to start"} {
		if !strings.Contains(msg, part) {
			t.Fatalf("message %q lacks %q", msg, part)
		}
	}
	after, err := st.Internal().Stat(e.ctx(), lock.Name)
	if err != nil || after.Version != info.Version {
		t.Fatalf("foreign lock touched: %v %v vs %v", err, after.Version, info.Version)
	}
}

func testStaleTakeover(t *testing.T, e *env) {
	st := e.store(nil)
	e.writeRecord(st, foreign("pod-a"))
	if _, err := lock.Acquire(e.ctx(), st, e.opts("pod-b")); !errors.Is(err, lock.ErrHeld) {
		t.Fatalf("fresh foreign lock: %v, want ErrHeld", err)
	}
	e.waitStale(st)
	b := e.acquire(st, e.opts("pod-b"))
	if r := b.Record(); r.InstanceID != "pod-b" || r.Epoch != 8 {
		t.Fatalf("record after stale takeover = %+v, want pod-b epoch 8", r)
	}
	if _, ok := e.logs.find("taken over", "stale"); !ok {
		t.Fatalf("no takeover log:\n%s", e.logs.dump())
	}
}

func testOwnLock(t *testing.T, e *env) {
	st := e.store(nil)
	e.writeRecord(st, foreign("pod-a")) // fresh, another pid and host: a previous life
	a := e.acquire(st, e.opts("pod-a"))
	if r := a.Record(); r.Epoch != 8 || r.AcquisitionID == "acq-pod-a" {
		t.Fatalf("reacquired record = %+v, want epoch 8 and a new acquisition", r)
	}
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
	if r.ProcessScope == "" || r.ProcessStart.IsZero() {
		t.Skip("this platform does not record process start times and PID scopes; PIDs are not probed")
	}
	return r
}

func testDeadPID(t *testing.T, e *env) {
	self := ourProcess(t, e)
	st := e.store(nil)
	rec := foreign("pod-a")
	rec.Hostname, rec.ProcessScope, rec.ProcessStart = self.Hostname, self.ProcessScope, self.ProcessStart
	rec.PID = 1<<30 + 7 // beyond any pid_max: no such process
	e.writeRecord(st, rec)
	b := e.acquire(st, e.opts("pod-b"))
	if b.Record().Epoch != 8 {
		t.Fatalf("epoch %d, want 8", b.Record().Epoch)
	}
	// The same record written from another PID space is not probed.
	st2 := e.storeRoot(nil, "other-scope")
	rec.ProcessScope = "another-boot/pid:[1]"
	e.writeRecord(st2, rec)
	_, err := lock.Acquire(e.ctx(), st2, e.opts("pod-b"))
	wantHeld(t, err, "pod-a")
}

func testReusedPID(t *testing.T, e *env) {
	self := ourProcess(t, e)
	st := e.store(nil)
	rec := foreign("pod-a")
	rec.Hostname, rec.ProcessScope, rec.PID = self.Hostname, self.ProcessScope, self.PID
	// Our own PID, but a process that started an hour before us: the PID
	// was reused.
	rec.ProcessStart = self.ProcessStart.Add(-time.Hour)
	e.writeRecord(st, rec)
	e.acquire(st, e.opts("pod-b"))

	// The same PID with our real start time is a live process: refused.
	st2 := e.storeRoot(nil, "alive")
	rec.ProcessStart = self.ProcessStart
	e.writeRecord(st2, rec)
	_, err := lock.Acquire(e.ctx(), st2, e.opts("pod-b"))
	wantHeld(t, err, "pod-a")
}

func testUnreadable(t *testing.T, e *env) {
	cases := []struct {
		name  string
		write func(st *store.Store)
	}{
		{"SealedToAnotherIdentity", func(st *store.Store) { e.writeUnreadable(st, "pod-a") }},
		{"NotALockRecord", func(st *store.Store) {
			if _, err := st.Internal().Put(e.ctx(), lock.Name, []byte("{not json"), store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}},
		{"EpochZero", func(st *store.Store) {
			rec := foreign("pod-a")
			rec.Epoch = 0 // no acquisition writes it: counting on would repeat an epoch
			e.writeRecord(st, rec)
		}},
		{"NotSealed", func(st *store.Store) {
			e.writeGarbage(st, lock.Name)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := e.storeRoot(nil, "unreadable-"+c.name)
			c.write(st)
			if s := e.status(st); !s.Present || s.Readable || s.Unreadable == "" {
				t.Fatalf("status of an unreadable lock = %+v", s)
			}
			l := e.acquire(st, e.opts("pod-b"))
			if l.Record().Epoch != 1 {
				t.Fatalf("epoch %d after an unreadable lock, want 1", l.Record().Epoch)
			}
			if s := e.status(st); !s.Readable || s.Record.AcquisitionID != l.Record().AcquisitionID {
				t.Fatalf("status after takeover = %+v", s)
			}
		})
	}
	if _, ok := e.logs.find("WARN", "unreadable"); !ok {
		t.Fatalf("no warning logged for an unreadable takeover:\n%s", e.logs.dump())
	}
}

func testRelease(t *testing.T, e *env) {
	st := e.store(nil)
	l := e.acquire(st, e.opts("pod-a"))
	fenced := st.WithFence(l)
	if _, err := fenced.Put(e.ctx(), "app", []byte("v1"), store.PutOptions{}); err != nil {
		t.Fatalf("write while held: %v", err)
	}
	if err := l.Release(e.ctx()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if s := e.status(st); s.Present {
		t.Fatalf("lock still present after release: %+v", s)
	}
	if !errors.Is(l.Err(), lock.ErrReleased) {
		t.Fatalf("Err after release = %v", l.Err())
	}
	select {
	case <-l.Context().Done():
		if !errors.Is(context.Cause(l.Context()), lock.ErrReleased) {
			t.Fatalf("context cause %v", context.Cause(l.Context()))
		}
	default:
		t.Fatal("context not cancelled on release")
	}
	select {
	case <-l.Lost():
		t.Fatal("Lost closed by a release")
	default:
	}
	_, err := fenced.Put(e.ctx(), "app", []byte("v2"), store.PutOptions{})
	if !errors.Is(err, store.ErrFenced) || !errors.Is(err, lock.ErrReleased) {
		t.Fatalf("write after release = %v, want ErrFenced and ErrReleased", err)
	}
	if err := l.Release(e.ctx()); err != nil {
		t.Fatalf("second Release = %v, want nil", err)
	}
	// The next instance boots at once.
	e.acquire(st, e.opts("pod-b"))
}

func testLossDetected(t *testing.T, e *env) {
	st := e.store(nil)
	a := e.acquire(st, e.opts("pod-a"))
	fenced := st.WithFence(a)
	// The same instance id restarted elsewhere takes the lock at once.
	b := e.acquire(st, e.opts("pod-a"))
	select {
	case <-a.Lost():
	case <-time.After(e.h.StaleAfter):
		t.Fatalf("old holder did not notice the takeover within %s\n%s", e.h.StaleAfter, e.logs.dump())
	}
	var le *lock.LostError
	if !errors.As(a.Err(), &le) || !errors.Is(a.Err(), lock.ErrLost) {
		t.Fatalf("Err = %v, want *LostError", a.Err())
	}
	if le.Holder == nil || le.Holder.AcquisitionID != b.Record().AcquisitionID {
		t.Fatalf("loss does not name the new holder: %+v", le)
	}
	if !errors.Is(context.Cause(a.Context()), lock.ErrLost) {
		t.Fatalf("context cause = %v", context.Cause(a.Context()))
	}
	_, err := fenced.Put(e.ctx(), "app", []byte("late"), store.PutOptions{})
	if !errors.Is(err, store.ErrFenced) || !errors.Is(err, lock.ErrLost) {
		t.Fatalf("write after loss = %v, want ErrFenced and ErrLost", err)
	}
	if b.Err() != nil {
		t.Fatalf("new holder: %v", b.Err())
	}
}

// stalledHolder acquires pod-a through the fault wrapper and stalls its
// storage, as if the process were paused: its heartbeats hang.
func stalledHolder(t *testing.T, e *env) (a *lock.Lock, resume func()) {
	a = e.acquire(e.store(e.f), e.opts("pod-a"))
	resume = e.f.Stall()
	t.Cleanup(resume)
	return a, resume
}

func testReleaseAfterLoss(t *testing.T, e *env) {
	st := e.store(nil)
	a, resume := stalledHolder(t, e)
	e.waitStale(st)
	b := e.acquire(st, e.opts("pod-b"))
	if !errors.Is(a.Err(), lock.ErrLost) {
		t.Fatalf("paused holder Err = %v, want ErrLost", a.Err())
	}
	resume()
	if err := a.Release(e.ctx()); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Release after loss = %v, want ErrLost", err)
	}
	s := e.status(st)
	if !s.Present || s.Record.AcquisitionID != b.Record().AcquisitionID {
		t.Fatalf("release after loss touched the new holder's lock: %+v", s)
	}

	// Taken over between two heartbeats: the holder learns it at release,
	// and still deletes nothing.
	st2 := e.storeRoot(nil, "between-beats")
	o := e.opts("pod-c")
	o.HeartbeatInterval = e.h.StaleAfter / 2
	c := e.acquire(st2, o)
	d := e.acquire(st2, e.opts("pod-c")) // the same instance restarted elsewhere
	if err := c.Release(e.ctx()); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Release of a lock taken over since the last heartbeat = %v, want ErrLost", err)
	}
	if s := e.status(st2); s.Record.AcquisitionID != d.Record().AcquisitionID {
		t.Fatalf("release deleted or changed the new holder's lock: %+v", s)
	}
}

func testPausedHolder(t *testing.T, e *env) {
	st := e.store(nil)
	a, resume := stalledHolder(t, e)
	fenced := e.store(e.b).WithFence(a)
	// Before the lease runs out the holder may write.
	if _, err := fenced.Put(e.ctx(), "app", []byte("v1"), store.PutOptions{}); err != nil {
		t.Fatalf("write within the lease: %v", err)
	}
	// The holder learns it lost the lock from its own clock, before the
	// storage answers anything and before anyone may judge it stale.
	select {
	case <-a.Lost():
	case <-time.After(e.h.StaleAfter):
		t.Fatalf("paused holder not told within the stale horizon")
	}
	if _, err := fenced.Put(e.ctx(), "app", []byte("v2"), store.PutOptions{}); !errors.Is(err, store.ErrFenced) || !errors.Is(err, lock.ErrLost) {
		t.Fatalf("write after the horizon = %v, want ErrFenced and ErrLost", err)
	}
	e.waitStale(st)
	b := e.acquire(st, e.opts("pod-b"))
	resume()
	time.Sleep(e.h.StaleAfter / 2) // two of a's heartbeat intervals
	if s := e.status(st); s.Record.AcquisitionID != b.Record().AcquisitionID {
		t.Fatalf("resumed holder wrote over the new holder: %+v", s.Record)
	}
	if b.Err() != nil {
		t.Fatalf("new holder: %v", b.Err())
	}
}

func testBriefOutage(t *testing.T, e *env) {
	a := e.acquire(e.store(e.f), e.opts("pod-a"))
	v0 := e.status(e.store(nil)).Version
	// Down for longer than a heartbeat interval but, counting the time
	// since the last heartbeat, well within the lease.
	e.f.SetUnavailable(true)
	time.Sleep(e.h.StaleAfter * 3 / 10)
	e.f.SetUnavailable(false)
	eventually(t, e.h.StaleAfter/3, "a heartbeat lands after the outage", func() bool {
		return e.status(e.store(nil)).Version != v0
	})
	if a.Err() != nil {
		t.Fatalf("lost after an outage shorter than the lease: %v", a.Err())
	}
	if _, ok := e.logs.find("heartbeat failed"); !ok {
		t.Fatalf("failed heartbeats not logged:\n%s", e.logs.dump())
	}
}

func testLostCreateAck(t *testing.T, e *env) {
	if !e.cas {
		t.Skip("needs conditional writes: the fault is a conditional create that lands but answers 412")
	}
	e.f.LosePutAcks(1)
	a := e.acquire(e.store(e.f), e.opts("pod-a"))
	if s := e.status(e.store(nil)); s.Record.AcquisitionID != a.Record().AcquisitionID || a.Record().Epoch != 1 {
		t.Fatalf("after a lost create answer: lock %+v, ours %+v", s.Record, a.Record())
	}
	// A takeover whose conditional replace lands but answers 412 too.
	st2 := e.storeRoot(e.f, "takeover")
	e.writeRecord(st2, foreign("pod-b"))
	e.f.LosePutAcks(1)
	b := e.acquire(st2, e.opts("pod-b"))
	if s := e.status(st2); s.Record.AcquisitionID != b.Record().AcquisitionID || b.Record().Epoch != 8 {
		t.Fatalf("after a lost replace answer: lock %+v, ours %+v", s.Record, b.Record())
	}
}

func testLostHeartbeatAck(t *testing.T, e *env) {
	if !e.cas {
		t.Skip("needs conditional writes")
	}
	a := e.acquire(e.store(e.f), e.opts("pod-a"))
	v0 := e.status(e.store(nil)).Version
	e.f.LosePutAcks(1)
	eventually(t, e.h.StaleAfter/2, "a heartbeat is written", func() bool { return e.status(e.store(nil)).Version != v0 })
	time.Sleep(e.h.StaleAfter / 2) // and the next one, on the version the lost answer hid
	if a.Err() != nil {
		t.Fatalf("holder lost its lock over its own write: %v\n%s", a.Err(), e.logs.dump())
	}
	if s := e.status(e.store(nil)); s.Record.AcquisitionID != a.Record().AcquisitionID {
		t.Fatalf("lock = %+v", s.Record)
	}
}

func testSkewedClock(t *testing.T, e *env) {
	for _, skew := range []time.Duration{-time.Hour, 10 * time.Minute} {
		t.Run(fmt.Sprint(skew), func(t *testing.T) {
			f := fault.New(e.b)
			f.SetClockSkew(skew)
			root := "skew" + strings.NewReplacer("-", "minus", ".", "").Replace(skew.String())
			st := e.storeRoot(f, root)
			a := e.acquire(st, e.opts("pod-a"))
			_, err := lock.Acquire(e.ctx(), st, e.opts("pod-b"))
			he := wantHeld(t, err, "pod-a")
			if he.HeartbeatAge > e.h.StaleAfter/2 {
				t.Fatalf("heartbeat age %s judged across clocks", he.HeartbeatAge)
			}
			// The holder's local times are informational only: a record
			// whose Heartbeat field is an hour old is still live.
			st2 := e.storeRoot(f, root+"-oldfields")
			rec := foreign("pod-c")
			rec.Heartbeat, rec.AcquiredAt = rec.Heartbeat.Add(-time.Hour), rec.AcquiredAt.Add(-time.Hour)
			e.writeRecord(st2, rec)
			_, err = lock.Acquire(e.ctx(), st2, e.opts("pod-b"))
			wantHeld(t, err, "pod-c")

			if err := a.Release(e.ctx()); err != nil {
				t.Fatal(err)
			}
			e.acquire(st, e.opts("pod-b"))
		})
	}
}

func testIgnoredConditions(t *testing.T, e *env) {
	if !e.cas {
		t.Skip("the backend reports no conditional writes; the lock never sends conditions")
	}
	// A server that accepts If-None-Match/If-Match and ignores them. The
	// lock reads before it writes, so the serial rules still hold; what
	// such a server cannot give is protection against racing writers (the
	// S3 backend's probe exists to report it as lacking conditional writes).
	e.f.SetIgnoreConditions(true)
	st := e.store(e.f)
	a := e.acquire(st, e.opts("pod-a"))
	_, err := lock.Acquire(e.ctx(), st, e.opts("pod-b"))
	wantHeld(t, err, "pod-a")
	if s := e.status(st); s.Record.AcquisitionID != a.Record().AcquisitionID {
		t.Fatalf("refused acquirer clobbered the lock on a server that ignores conditions: %+v", s.Record)
	}
	if err := a.Release(e.ctx()); err != nil {
		t.Fatal(err)
	}
	if s := e.status(st); s.Present {
		t.Fatalf("release left the lock: %+v", s)
	}

	// A holder paused past the horizon learns it lost the lock from its
	// own clock and, resumed, neither heartbeats over the new holder nor
	// deletes its lock at release.
	paused := fault.New(e.f)
	c := e.acquire(e.store(paused), e.opts("pod-c"))
	resume := paused.Stall()
	t.Cleanup(resume)
	e.waitStale(st)
	d := e.acquire(st, e.opts("pod-d"))
	resume()
	if !errors.Is(c.Err(), lock.ErrLost) {
		t.Fatalf("paused holder Err = %v, want ErrLost", c.Err())
	}
	if err := c.Release(e.ctx()); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Release after loss = %v, want ErrLost", err)
	}
	if s := e.status(st); s.Record.AcquisitionID != d.Record().AcquisitionID {
		t.Fatalf("new holder's lock touched: %+v", s)
	}
}

func testWaitForStale(t *testing.T, e *env) {
	st := e.store(nil)
	written := time.Now()
	e.writeRecord(st, foreign("pod-a"))
	o := e.opts("pod-b")
	o.WaitForStale = true
	short, cancel := context.WithTimeout(e.ctx(), e.h.StaleAfter/4)
	defer cancel()
	if _, err := lock.Acquire(short, st, o); !errors.Is(err, lock.ErrHeld) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait cut short = %v, want ErrHeld and DeadlineExceeded", err)
	}
	b := e.acquire(st, o)
	if b.Record().Epoch != 8 {
		t.Fatalf("epoch %d", b.Record().Epoch)
	}
	// One-second storage timestamps can make a lock look up to a second
	// older than it is.
	if age := time.Since(written); age < e.h.StaleAfter*3/4 {
		t.Fatalf("took a live lock %s after it was written (stale after %s)", age, e.h.StaleAfter)
	}
}

func testInspect(t *testing.T, e *env) {
	st := e.store(nil)
	if s := e.status(st); s.Present {
		t.Fatalf("empty store: %+v", s)
	}
	a := e.acquire(st, e.opts("pod-a"))
	s := e.status(st)
	if !s.Present || !s.Readable || s.Stale || s.Record.InstanceID != "pod-a" || s.Record.Epoch != 1 ||
		s.StaleAfter != e.h.StaleAfter || s.StaleIn <= 0 || s.Version == "" {
		t.Fatalf("status of a live lock = %+v", s)
	}
	if s.Record.AcquisitionID != a.Record().AcquisitionID {
		t.Fatalf("status record %+v", s.Record)
	}
	st2 := e.storeRoot(nil, "stale")
	e.writeRecord(st2, foreign("pod-z"))
	eventually(t, 2*e.h.StaleAfter, "Inspect reports the lock stale", func() bool {
		s := e.status(st2)
		return s.Stale && s.StaleIn == 0 && s.HeartbeatAge >= e.h.StaleAfter
	})
}

func testBreak(t *testing.T, e *env) {
	ctx := e.ctx()
	st := e.store(nil)
	if _, err := lock.Break(ctx, st, lock.BreakOptions{StaleAfter: e.h.StaleAfter}); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("break with no lock = %v, want ErrNotFound", err)
	}
	a := e.acquire(st, e.opts("pod-a"))
	for _, o := range []lock.BreakOptions{{}, {Holder: "pod-a"}, {Force: true}, {Force: true, Holder: "pod-x"}} {
		o.StaleAfter = e.h.StaleAfter
		_, err := lock.Break(ctx, st, o)
		wantHeld(t, err, "pod-a")
		if strings.Contains(err.Error(), "refusing to start") {
			t.Fatalf("break refusal reads like a boot refusal: %v", err)
		}
	}
	if a.Err() != nil {
		t.Fatalf("refused break hurt the holder: %v", a.Err())
	}
	rec, err := lock.Break(ctx, st, lock.BreakOptions{Force: true, Holder: "pod-a", StaleAfter: e.h.StaleAfter})
	if err != nil || rec.AcquisitionID != a.Record().AcquisitionID {
		t.Fatalf("forced break = %+v, %v", rec, err)
	}
	select {
	case <-a.Lost():
	case <-time.After(e.h.StaleAfter):
		t.Fatal("holder of a broken lock not told")
	}
	// Stale: removed without force.
	st2 := e.storeRoot(nil, "stale")
	e.writeRecord(st2, foreign("pod-s"))
	e.waitStale(st2)
	if rec, err := lock.Break(ctx, st2, lock.BreakOptions{StaleAfter: e.h.StaleAfter}); err != nil || rec.InstanceID != "pod-s" {
		t.Fatalf("break stale = %+v, %v", rec, err)
	}
	if s := e.status(st2); s.Present {
		t.Fatalf("stale lock not removed: %+v", s)
	}
}

func testRequestCounts(t *testing.T, e *env) {
	st := e.store(e.f)
	o := e.opts("pod-a")
	o.HeartbeatInterval = e.h.StaleAfter / 3
	e.f.ResetCounts()
	l := e.acquire(st, o)
	acquire := e.f.Counts()
	e.f.ResetCounts()
	v0 := e.status(e.store(nil)).Version
	eventually(t, e.h.StaleAfter, "one heartbeat", func() bool { return e.status(e.store(nil)).Version != v0 })
	beat := e.f.Counts()
	e.f.ResetCounts()
	if err := l.Release(e.ctx()); err != nil {
		t.Fatal(err)
	}
	release := e.f.Counts()
	t.Logf("request counts (%s): acquire free lock: %v; one heartbeat: %v; release: %v", e.mode(), acquire, beat, release)
	// Acquire: the lock (absent), the saved epoch, the create. Release: the
	// lock (still ours?), the epoch save against the version the
	// acquisition read, the delete.
	if e.cas && (acquire.Total() > 3 || beat.Total() != 1 || release.Total() > 3) {
		t.Fatalf("compare-and-swap: acquire %d requests (want ≤ 3), heartbeat %d (want 1), release %d (want ≤ 3)", acquire.Total(), beat.Total(), release.Total())
	}
}

func testRace(t *testing.T, e *env) {
	const acquirers = 8
	run := func(settle time.Duration, label string) (doubles int) {
		for trial := range e.h.RaceTrials {
			st := e.storeRoot(nil, fmt.Sprintf("race-%s-%d", label, trial))
			var (
				wg     sync.WaitGroup
				mu     sync.Mutex
				won    []*lock.Lock
				others []error
			)
			start := make(chan struct{})
			for i := range acquirers {
				wg.Go(func() {
					o := e.opts(fmt.Sprintf("racer-%d", i))
					o.SettleDelay = settle
					<-start
					l, err := lock.Acquire(e.ctx(), st, o)
					mu.Lock()
					defer mu.Unlock()
					if err == nil {
						won = append(won, l)
					} else if !errors.Is(err, lock.ErrHeld) {
						others = append(others, err)
					}
				})
			}
			close(start)
			wg.Wait()
			for _, l := range won {
				_ = l.Release(context.Background())
			}
			if len(others) > 0 {
				t.Fatalf("trial %d: unexpected errors: %v", trial, others)
			}
			if len(won) > 1 {
				doubles++
			}
			if e.cas && len(won) != 1 {
				t.Fatalf("trial %d: %d winners among %d compare-and-swap acquirers, want exactly 1", trial, len(won), acquirers)
			}
			if len(won) == 0 {
				t.Errorf("trial %d (%s): nobody won", trial, label)
			}
		}
		return doubles
	}
	if e.cas {
		run(0, "cas")
		t.Logf("compare-and-swap: %d trials of %d concurrent acquirers, exactly one winner in each", e.h.RaceTrials, acquirers)
		return
	}
	with := run(e.h.StaleAfter/8, "readback")
	without := run(-1, "noreadback")
	t.Logf("advisory: %d trials of %d concurrent acquirers: %d ended with two or more believed holders with the read-back (settle %s), %d without",
		e.h.RaceTrials, acquirers, with, e.h.StaleAfter/8, without)
}
