// Package locktest is the conformance suite of the instance lock: every rule
// of package lock (docs/adr/0019, 0020), run against a backend supplied by a
// [Harness] and against that backend wrapped in faults (lost answers, a
// server that ignores conditions, storage-clock steps, stalled, hung or
// unreachable storage, delayed requests). Each backend's test calls [Run]:
//
//	func TestLock_Mem(t *testing.T) {
//		locktest.Run(t, locktest.Harness{
//			NewBackend: func(t *testing.T) backend.Backend { return mem.New(mem.Options{}) },
//			Synctest:   true,
//		})
//	}
//
// Timings scale with Harness.StaleAfter, so a backend with second-resolution
// timestamps (S3) runs the same cases with a longer window.
package locktest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/driver"
	"github.com/cairnhq/state/internal/fault"
	"github.com/cairnhq/state/internal/lockadmin"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/storemeta"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// Harness supplies the backend under test.
type Harness struct {
	// NewBackend returns a new, empty backend (a fresh bucket or
	// directory). The suite calls it once per case.
	NewBackend func(t *testing.T) backend.Backend
	// StaleAfter is the stale window the suite uses; heartbeats run at a
	// quarter of it. It must be several times the backend's timestamp
	// resolution plus request latency. Zero means 600ms, which suits an
	// in-memory backend; S3 servers (one-second timestamps) need about 4s.
	StaleAfter time.Duration
	// Mode forces the lock's mode (lock.Options.Mode) in every case; empty
	// lets the lock choose from the backend's capabilities.
	Mode lock.Mode
	// Synctest runs every case in a testing/synctest bubble, in virtual
	// time: for backends whose clock is this process's (mem). NewBackend
	// is then called inside the bubble. Without it, cases run in parallel
	// in real time.
	Synctest bool
	// RaceTrials is how many trials of 8 concurrent acquirers the race
	// case runs; zero means 50.
	RaceTrials int
	// DelayedRaceTrials is how many trials the race with every lock request
	// delayed at random runs; zero means RaceTrials/5 (at least 2).
	DelayedRaceTrials int
	// MaxDelay is the longest random delay of that race; zero means
	// StaleAfter/2.
	MaxDelay time.Duration
	// RequestTimeout is the lock's request timeout in every case
	// (lock.Options.RequestTimeout); zero keeps the lock's default, half a
	// heartbeat. Servers that answer slowly under load (a three-node
	// Garage of debug builds on two busy cores) need more.
	RequestTimeout time.Duration
}

// Flags for figure runs (the 50 trials × 8 with every request
// delayed up to 2 s) without slowing down make test: they override the
// harness's values when set, e.g.
//
//	go test -run 'TestLock_Garage$/Concurrent' ./lock -args -locktest.race-trials=50 -locktest.delayed-race-trials=50 -locktest.max-delay=2s
var (
	flagRaceTrials        = flag.Int("locktest.race-trials", 0, "trials of the concurrent-acquirers race (0: the harness's)")
	flagDelayedRaceTrials = flag.Int("locktest.delayed-race-trials", 0, "trials of the race with every request delayed (0: the harness's)")
	flagMaxDelay          = flag.Duration("locktest.max-delay", 0, "longest random request delay of that race (0: the harness's)")
)

type testCase struct {
	name string
	fn   func(*testing.T, *env)
	// only restricts a case to one mode ("" for both).
	only lock.Mode
}

// Run runs the whole suite as subtests of t.
func Run(t *testing.T, h Harness) {
	if h.StaleAfter == 0 {
		h.StaleAfter = 600 * time.Millisecond
	}
	if *flagRaceTrials > 0 {
		h.RaceTrials = *flagRaceTrials
	}
	if *flagDelayedRaceTrials > 0 {
		h.DelayedRaceTrials = *flagDelayedRaceTrials
	}
	if *flagMaxDelay > 0 {
		h.MaxDelay = *flagMaxDelay
	}
	if h.RaceTrials == 0 {
		h.RaceTrials = 50
	}
	if h.DelayedRaceTrials == 0 {
		h.DelayedRaceTrials = max(h.RaceTrials/5, 2)
	}
	if h.MaxDelay == 0 {
		h.MaxDelay = h.StaleAfter / 2
	}
	cases := []testCase{
		{"FreshAcquire_WritesSealedRecordAndMarker", testFreshAcquire, ""},
		{"LiveForeignHolder_RefusesAndNamesHolder", testLiveForeign, ""},
		{"LiveForeignRecord_MessageNamesHolderPIDHostAgeAndHorizon", testRefusalMessage, ""},
		{"SameIDSameProcess_RefusedAsDuplicate", testDuplicateInProcess, ""},
		{"SameIDOtherPIDSpace_Refreshing_RefusedAsDuplicate", testDuplicateElsewhere, ""},
		{"SameIDOtherPIDSpace_MissedHeartbeat_TakenOverAfterWatch", testCrashRestart, ""},
		{"StaleLock_TakenOver", testStaleTakeover, ""},
		{"SameHostDeadOrReusedPID_TakenOverAtOnce", testDeadPID, ""},
		{"UnreadableLock_RefusedWhileFreshTakenOverOnceStale", testUnreadable, ""},
		{"StorageClockForwardStep_LiveHolderNotThrownOut", testClockForward, ""},
		{"StorageClockBackwardStep_DeadHolderTakenOverAfterObservation", testClockBackward, ""},
		{"SkewedStorageClock_JudgedOnStorageClock", testSkewedClock, ""},
		{"ServerIgnoresConditions_SerialRulesHold", testIgnoredConditions, lock.ModeCAS},
		{"Release_GivesUpTheLockAndFences", testRelease, ""},
		{"Release_NextAcquisitionTakesTheReleasedRecordAtOnce", testReleasedRecordTaken, lock.ModeCAS},
		{"Release_ClaimsLeaveNothingOfOursInOneRequest", testClaimsReleaseOneRequest, lock.ModeClaims},
		{"HeartbeatFindsOtherHolder_ReportsLoss", testLossDetected, ""},
		{"ReleaseRacingTakeover_ReportsLostAndLeavesNewHolder", testReleaseRacingTakeover, ""},
		{"ReleaseDuringHeartbeat_NoLockBroughtBack", testReleaseDuringHeartbeat, ""},
		{"BriefOutage_SuspendsThenResumes", testBriefOutage, ""},
		{"LongOutage_Lost", testLongOutage, ""},
		{"SuspendedWhileAnotherIDTries_ReopensNotLost", testSuspendedWithContender, ""},
		{"SuspendedIntentVanishesAtItsRead_NeverReopens", testSuspendedVanishedIntent, lock.ModeClaims},
		{"SuspendedReadOfAClaimFails_NotLost", testSuspendedReadFails, lock.ModeClaims},
		{"SuspendedStandbyIntentsVanishAtEveryRead_Reopens", testSuspendedStandbyIntentsVanish, lock.ModeClaims},
		{"PausedPastStaleWindow_LosesAndWritesRefused", testPausedHolder, ""},
		{"StalledFencedWriteAcrossTakeover_CutOffNeverLands", testStalledFencedWrite, ""},
		{"HungHeartbeatRequest_DoesNotEatTheLease", testHungHeartbeat, ""},
		{"ReleaseWithFencedWriteInFlight_DrainsBeforeTheNextHolder", testReleaseDrainsWrites, ""},
		{"LateDeliveredFencedWrite_NeverLandsOverTheNextHolder", testLateDeliveredWrite, ""},
		{"SlowIntentSkewedJudge_NotJudgedDead", testSlowIntentSkewedJudge, lock.ModeClaims},
		{"SuspendedHolderForwardStep_AnotherIDWaitsTheWindow", testSuspendedHolderForwardStep, ""},
		{"BreakWithoutForce_ForwardStep_Refused", testBreakForwardStep, ""},
		{"HeartbeatOutlivesLease_TakenOverMeanwhile_Lost", testHeartbeatOutlivesLease, lock.ModeCAS},
		{"LostLockWriteAck_StillAcquired", testLostCreateAck, lock.ModeCAS},
		{"LostHeartbeatAck_StillHeld", testLostHeartbeatAck, lock.ModeCAS},
		{"WaitForStale_LeaseCountsFromTheWriteThatSucceeded", testWaitForStale, ""},
		{"Inspect_JudgesTheHolderAsTheLockWould", testInspect, ""},
		{"Break_StaleFreelyLiveOnlyForcedWithHolder", testBreak, ""},
		{"Epoch_GrowsAcrossReleaseAndReacquire", testEpochAcrossRelease, ""},
		{"Epoch_GrowsAcrossBreaks", testEpochAcrossBreak, ""},
		{"Epoch_GrowsAcrossOutOfBandDelete", testEpochOutOfBandDelete, ""},
		{"Epoch_GrowsAcrossOutOfBandDeleteOfAReleasedLock", testEpochOutOfBandDeleteReleased, lock.ModeCAS},
		{"Epoch_GrowsAcrossBlocks", testEpochAcrossBlocks, lock.ModeCAS},
		{"Epoch_GrowsAcrossUnreadableTakeover", testEpochUnreadableTakeover, ""},
		{"Epoch_OverflowRefused", testEpochOverflow, ""},
		{"ZombieIntent_BlocksAtMostTheIntentWindow", testZombieIntent, lock.ModeClaims},
		{"ConfirmAnsweredAfterDeadline_NotTrusted", testLateConfirm, lock.ModeClaims},
		{"HolderIntentLeftBehind_JudgedByItsHeldClaim", testHolderIntentLeftBehind, lock.ModeClaims},
		{"ClaimNotWrittenByTheLock_ReportedNotTrusted", testForeignClaimNames, lock.ModeClaims},
		{"ListingError_NeverCountsAsNoClaim", testListingError, ""},
		{"RequestCounts", testRequestCounts, ""},
		{"ConcurrentAcquirers_RaceTrials", testRace, ""},
		{"ConcurrentAcquirers_RequestsDelayedAtRandom", testRaceDelayed, ""},
		{"ConcurrentAcquirers_WinnerLostWhileARacerSlept_TakenOverInTurn", testRaceTakeoverInTurn, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			run := func(t *testing.T) {
				e := newEnv(t, h)
				if c.only != "" && c.only != e.mode {
					t.Skipf("a %s case; this backend runs %s mode", c.only, e.mode)
				}
				c.fn(t, e)
			}
			if h.Synctest {
				synctest.Test(t, run)
				return
			}
			t.Parallel()
			run(t)
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
	sealer storeadmin.Sealer
	logs   *logRecorder
	mode   lock.Mode // the mode the lock runs in
	cas    bool      // the backend has conditional writes
}

func newEnv(t *testing.T, h Harness) *env {
	s, err := newAgeSealer()
	if err != nil {
		t.Fatal(err)
	}
	b := h.NewBackend(t)
	caps, err := driver.ResolveCapabilities(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, h: h, b: b, f: fault.New(b), sealer: s, logs: newLogRecorder(t), cas: caps.ConditionalWrites}
	switch {
	case h.Mode != "":
		e.mode = h.Mode
	case e.cas:
		e.mode = lock.ModeCAS
	default:
		e.mode = lock.ModeClaims
	}
	return e
}

func (e *env) stale() time.Duration     { return e.h.StaleAfter }
func (e *env) heartbeat() time.Duration { return e.h.StaleAfter / 4 }

// missed is how long an acquirer watches a same-id record before it counts
// as having missed a heartbeat.
func (e *env) missed() time.Duration { return e.heartbeat() + e.heartbeat()/2 }

// slack absorbs request latency and, on S3, one-second timestamps.
func (e *env) slack() time.Duration {
	if e.h.Synctest {
		return 10 * time.Millisecond
	}
	return e.h.StaleAfter/4 + 500*time.Millisecond
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
	return e.storeWith(b, root, e.sealer)
}

func (e *env) storeWith(b backend.Backend, root string, s storeadmin.Sealer) *store.Store {
	e.t.Helper()
	st, err := storeadmin.Open(b, s, store.Options{Root: root, Logger: slog.New(e.logs)})
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// otherKeyStore is st's objects seen by an instance with another key.
func (e *env) otherKeyStore(st *store.Store) *store.Store {
	e.t.Helper()
	other, err := newAgeSealer()
	if err != nil {
		e.t.Fatal(err)
	}
	return e.storeWith(storeadmin.Backend(st), storeadmin.Root(st), other)
}

func (e *env) opts(id string) lock.Options {
	return lock.Options{
		InstanceID:        id,
		StaleAfter:        e.stale(),
		HeartbeatInterval: e.heartbeat(),
		RequestTimeout:    e.h.RequestTimeout,
		Mode:              e.h.Mode,
		Logger:            slog.New(e.logs).With("test_instance", id),
	}
}

// acquire takes the lock or fails the test; the lock is released when the
// test ends, so that no heartbeat outlives it.
func (e *env) acquire(st *store.Store, o lock.Options) *lock.Lock {
	e.t.Helper()
	l, err := e.tryAcquire(st, o)
	if err != nil {
		e.t.Fatalf("Acquire(%s): %v\nlogs:\n%s", o.InstanceID, err, e.logs.dump())
	}
	return l
}

// tryAcquire is Acquire, with the lock (if any) released when the test
// ends.
func (e *env) tryAcquire(st *store.Store, o lock.Options) (*lock.Lock, error) {
	l, err := lock.Acquire(e.ctx(), st, o)
	if err == nil {
		e.t.Cleanup(func() { _ = l.Release(context.Background()) })
	}
	return l, err
}

func (e *env) status(st *store.Store) lockadmin.Status {
	e.t.Helper()
	s, err := lockadmin.Inspect(e.ctx(), st, lockadmin.InspectOptions{StaleAfter: e.stale()})
	if err != nil {
		e.t.Fatalf("Inspect: %v", err)
	}
	return s
}

// The lock's object names, as docs/adr/0019 and 0020 define them.
func heldClaim(acq string) string   { return ".lock.d/claim-" + acq + "-2-held" }
func intentClaim(acq string) string { return ".lock.d/claim-" + acq + "-1-intent" }
func marker(epoch uint64) string    { return fmt.Sprintf(".lock.d/epoch-%020d", epoch) }

// firstBlock is the ceiling of the first block of epochs a compare-and-swap
// store reserves (docs/adr/0066: a thousand epochs a marker).
const firstBlock = 1000

// holderObject is where a holder's record lives in this mode.
func (e *env) holderObject(rec lock.Record) string {
	if e.mode == lock.ModeCAS {
		return storemeta.LockName
	}
	return heldClaim(rec.AcquisitionID)
}

// foreign is a record of a live holder on another host, at epoch 7.
func (e *env) foreign(id string) lock.Record {
	now := time.Now().UTC()
	return lock.Record{
		InstanceID: id, Hostname: "elsewhere.example", PID: 4242,
		ProcessScope: "another-boot/pid:[4026531836]", ProcessStartTicks: 12345,
		AcquiredAt: now, Heartbeat: now, Epoch: 7, Mode: e.mode, State: lockadmin.StateHeld,
		StaleAfter: e.stale(), HeartbeatInterval: e.heartbeat(),
		AcquisitionID: uuid.NewString(),
	}
}

// plant writes rec where a holder of this mode keeps it, with its epoch
// marker, as another instance would; it returns the holder object's info.
func (e *env) plant(st *store.Store, rec lock.Record) store.Info {
	e.t.Helper()
	e.put(st, marker(rec.Epoch), []byte(fmt.Sprintf(`{"epoch":%d}`, rec.Epoch)))
	return e.putRecord(st, e.holderObject(rec), rec)
}

func (e *env) putRecord(st *store.Store, name string, rec lock.Record) store.Info {
	e.t.Helper()
	data, err := jsonRecord(rec)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.put(st, name, data)
}

func (e *env) put(st *store.Store, name string, data []byte) store.Info {
	e.t.Helper()
	info, err := storeadmin.Internal(st).Put(e.ctx(), name, data, store.PutOptions{})
	if err != nil {
		e.t.Fatalf("write %s: %v", name, err)
	}
	return info
}

// refresh rewrites rec (its heartbeat) every interval, as a live holder in
// another PID space would, until the returned stop is called or the test
// ends.
func (e *env) refresh(st *store.Store, rec lock.Record, every time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				rec.Heartbeat = time.Now().UTC()
				data, _ := jsonRecord(rec)
				_, _ = storeadmin.Internal(st).Put(context.Background(), e.holderObject(rec), data, store.PutOptions{})
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(done); wg.Wait() }) }
	e.t.Cleanup(stop)
	return stop
}

// version is the current version of name (empty when absent).
func (e *env) version(st *store.Store, name string) string {
	e.t.Helper()
	info, err := storeadmin.Internal(st).Stat(e.ctx(), name)
	if errors.Is(err, store.ErrNotFound) {
		return ""
	}
	if err != nil {
		e.t.Fatalf("stat %s: %v", name, err)
	}
	return info.Version
}

// names lists the lock's objects of st.
func (e *env) names(st *store.Store) []string {
	e.t.Helper()
	var out []string
	if err := storeadmin.Internal(st).List(e.ctx(), ".lock", func(i store.Info) error {
		out = append(out, i.Name)
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
	return out
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

// never fails the test if cond holds at any poll during d.
func never(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			t.Fatalf("%s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// isLost reports whether l's Lost channel is closed.
func isLost(l *lock.Lock) bool {
	select {
	case <-l.Lost():
		return true
	default:
		return false
	}
}

func wantHeld(t *testing.T, err error, holder string) *lock.HeldError {
	t.Helper()
	var he *lock.HeldError
	if !errors.As(err, &he) || !errors.Is(err, lock.ErrHeld) {
		t.Fatalf("err = %v, want a *HeldError", err)
	}
	if he.Holder.InstanceID != holder {
		t.Fatalf("HeldError names %q, want %q (%v)", he.Holder.InstanceID, holder, err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("%q", holder)) {
		t.Fatalf("message %q does not name the holder %q", err, holder)
	}
	return he
}

// part runs one part of a case: a subtest in real time (in parallel with
// the case's other parts, which must use stores of their own), a labelled
// step inside a synctest bubble (where t.Run is not allowed). fn gets an
// env whose helpers fail and clean up on the part's t: a subtest that
// called its parent's Fatal would end the wrong goroutine.
func (e *env) part(t *testing.T, name string, fn func(t *testing.T, e *env)) {
	t.Helper()
	if e.h.Synctest {
		t.Logf("part %s", name)
		fn(t, e)
		return
	}
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		pe := *e
		pe.t = t
		fn(t, &pe)
	})
}
