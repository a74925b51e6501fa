package locktest

import (
	"errors"
	"strings"
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// writeUnreadable puts a lock record sealed to another identity on st, as
// a live instance whose key this one lacks would, and returns its version.
func (e *env) writeUnreadable(st *store.Store, id string) store.Info {
	e.t.Helper()
	return e.writeRecord(e.otherKeyStore(st), foreign(id))
}

// otherKeyStore returns a store on st's backend and root that seals to a
// fresh identity of its own: what it writes, st cannot open.
func (e *env) otherKeyStore(st *store.Store) *store.Store {
	e.t.Helper()
	other, err := newAgeSealer()
	if err != nil {
		e.t.Fatal(err)
	}
	o, err := store.Open(e.b, other, store.Options{Root: st.Root()})
	if err != nil {
		e.t.Fatal(err)
	}
	return o
}

// writeGarbage puts bytes that are not an envelope at the reserved name
// on st, straight through the backend.
func (e *env) writeGarbage(st *store.Store, name string) {
	e.t.Helper()
	key, err := st.Internal().Key(name)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.b.Put(e.ctx(), key, []byte("garbage, not an envelope"), backend.PutOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// lockVersion is the version of the lock object on st ("" when absent).
func (e *env) lockVersion(st *store.Store) string {
	e.t.Helper()
	return e.status(st).Version
}

// wantUnreadableHeld fails the test unless err refuses an unreadable live
// lock: a *HeldError (ErrHeld) that names no holder, says why the lock
// could not be read and that it may belong to a live instance.
func wantUnreadableHeld(t *testing.T, err error, what string) *lock.HeldError {
	t.Helper()
	var he *lock.HeldError
	if !errors.As(err, &he) || !errors.Is(err, lock.ErrHeld) {
		t.Fatalf("%s: err = %v, want a *HeldError for an unreadable live lock", what, err)
	}
	if he.Unreadable == "" || he.Holder.InstanceID != "" || he.StaleIn <= 0 {
		t.Fatalf("%s: HeldError = %+v, want Unreadable set, no holder, StaleIn > 0", what, he)
	}
	for _, part := range []string{"could not be read", "may belong to a live instance", "stale after "} {
		if !strings.Contains(err.Error(), part) {
			t.Fatalf("%s: message %q lacks %q", what, err, part)
		}
	}
	return he
}

// testUnreadableLiveForOperators pins how operator tools see an unreadable
// lock: by its age on the storage clock, like any other. Inspect calls a
// fresh one live; Break refuses it unless forced (no holder id can be
// matched, so Force alone is required); an acquirer with RefuseUnreadable
// (the CLI's writes) refuses it until it is stale, leaving it untouched.
func testUnreadableLiveForOperators(t *testing.T, e *env) {
	ctx := e.ctx()
	st := e.store(nil)
	info := e.writeUnreadable(st, "pod-a")

	s := e.status(st)
	if !s.Present || s.Readable || s.Stale || s.StaleIn <= 0 || s.Unreadable == "" {
		t.Fatalf("status of a fresh unreadable lock = %+v, want present, unreadable, not stale", s)
	}
	for _, o := range []lock.BreakOptions{{}, {Holder: "pod-a"}, {Force: true, Holder: "pod-a"}} {
		o.StaleAfter = e.h.StaleAfter
		_, err := lock.Break(ctx, st, o)
		he := wantUnreadableHeld(t, err, "Break of a fresh unreadable lock")
		if !strings.Contains(he.Error(), "forced") {
			t.Fatalf("Break refusal %q does not say it needs forcing", he)
		}
	}
	o := e.opts("pod-b")
	o.RefuseUnreadable = true
	_, err := lock.Acquire(ctx, st, o)
	wantUnreadableHeld(t, err, "Acquire with RefuseUnreadable")
	if v := e.lockVersion(st); v != info.Version {
		t.Fatalf("a refusal touched the unreadable lock: version %q, was %q", v, info.Version)
	}
	// Forced, with no holder to match: removed, and it says it was
	// unreadable by returning a zero record.
	rec, err := lock.Break(ctx, st, lock.BreakOptions{Force: true, StaleAfter: e.h.StaleAfter})
	if err != nil || rec.InstanceID != "" {
		t.Fatalf("forced break of an unreadable lock = %+v, %v", rec, err)
	}
	if s := e.status(st); s.Present {
		t.Fatalf("forced break left the lock: %+v", s)
	}

	// Once stale on the storage clock, it is removed without force and
	// taken over by a RefuseUnreadable acquirer.
	st2 := e.storeRoot(nil, "stale-unreadable")
	e.writeUnreadable(st2, "pod-a")
	e.waitStale(st2)
	if s := e.status(st2); s.StaleIn != 0 || s.HeartbeatAge < e.h.StaleAfter*3/4 {
		t.Fatalf("status of a stale unreadable lock = %+v", s)
	}
	l := e.acquire(st2, o)
	if s := e.status(st2); !s.Readable || s.Record.AcquisitionID != l.Record().AcquisitionID {
		t.Fatalf("RefuseUnreadable acquirer did not take a stale unreadable lock over: %+v", s)
	}
	st3 := e.storeRoot(nil, "stale-unreadable-break")
	e.writeUnreadable(st3, "pod-a")
	e.waitStale(st3)
	if rec, err := lock.Break(ctx, st3, lock.BreakOptions{StaleAfter: e.h.StaleAfter}); err != nil || rec.InstanceID != "" {
		t.Fatalf("break of a stale unreadable lock = %+v, %v", rec, err)
	}
}

// testRefusalWording pins the caller's wording at the end of a refusal: the
// default (a booting application) and a caller's own (the CLI's writes).
func testRefusalWording(t *testing.T, e *env) {
	st := e.store(nil)
	e.writeRecord(st, foreign("pod-a"))
	_, err := lock.Acquire(e.ctx(), st, e.opts("pod-b"))
	wantHeld(t, err, "pod-a")
	if !strings.HasSuffix(err.Error(), "): another instance is using this store; refusing to start") {
		t.Fatalf("default refusal %q does not end with the boot wording", err)
	}
	o := e.opts("pod-b")
	o.Refusal = "refusing to write"
	_, err = lock.Acquire(e.ctx(), st, o)
	wantHeld(t, err, "pod-a")
	if !strings.HasSuffix(err.Error(), "): another instance is using this store; refusing to write") || strings.Contains(err.Error(), "start") {
		t.Fatalf("refusal with Options.Refusal = %q", err)
	}
	// The same wording for an unreadable lock the caller refuses.
	st2 := e.storeRoot(nil, "unreadable")
	e.writeUnreadable(st2, "pod-a")
	o.RefuseUnreadable = true
	_, err = lock.Acquire(e.ctx(), st2, o)
	wantUnreadableHeld(t, err, "unreadable refusal")
	if !strings.HasSuffix(err.Error(), "; refusing to write") {
		t.Fatalf("unreadable refusal with Options.Refusal = %q", err)
	}
}

// testHolderStaleWindow pins that a lock is judged stale with the longer of
// the judge's window and the one the holder recorded: a holder configured
// with a long window (and heartbeating accordingly) is not taken over, nor
// reported stale, nor broken without force, by someone with a short one.
func testHolderStaleWindow(t *testing.T, e *env) {
	// pod-a heartbeats every two short windows, so its lock is older than
	// the short window (and still live under its own) for more than a
	// third of each cycle, even with second-resolution server times.
	short, long := e.h.StaleAfter, 4*e.h.StaleAfter
	st := e.store(nil)
	oa := e.opts("pod-a")
	oa.StaleAfter, oa.HeartbeatInterval = long, long/2
	a := e.acquire(st, oa)
	if got := a.Record().StaleAfter; got != long {
		t.Fatalf("the record carries stale window %s, want the holder's %s", got, long)
	}
	// Wait until pod-a's lock is older than the short window.
	var s lock.Status
	eventually(t, 2*long, "the holder's heartbeat grows older than the short window", func() bool {
		s = e.status(st)
		return s.HeartbeatAge > short+short/4
	})
	if s.Stale || s.StaleAfter != long || s.StaleIn <= 0 {
		t.Fatalf("Inspect with %s of a lock whose holder runs %s = %+v, want live, judged with %s", short, long, s, long)
	}
	_, err := lock.Acquire(e.ctx(), st, e.opts("pod-b"))
	he := wantHeld(t, err, "pod-a")
	if he.StaleAfter != long || he.StaleIn <= 0 || !strings.Contains(err.Error(), "stale after "+long.String()+" (in ") {
		t.Fatalf("refusal judged with %s, want the holder's %s: %v", he.StaleAfter, long, err)
	}
	_, err = lock.Break(e.ctx(), st, lock.BreakOptions{StaleAfter: short})
	if he := wantHeld(t, err, "pod-a"); he.StaleAfter != long {
		t.Fatalf("Break refusal judged with %s, want %s", he.StaleAfter, long)
	}
	if a.Err() != nil {
		t.Fatalf("the holder lost its lock: %v", a.Err())
	}
	// The other way round: a judge with a longer window than the holder
	// recorded keeps its own.
	ob := e.opts("pod-b")
	ob.StaleAfter = 2 * long
	_, err = lock.Acquire(e.ctx(), st, ob)
	if he := wantHeld(t, err, "pod-a"); he.StaleAfter != 2*long {
		t.Fatalf("refusal judged with %s, want the acquirer's own %s", he.StaleAfter, 2*long)
	}
	// A record without a window (an older version's) is judged with the
	// judge's own: every case that writes foreign() covers it.
}
