package lock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/store"
)

type lockState int

const (
	held lockState = iota
	lost
	released
)

// Lock is a held instance lock. A goroutine refreshes it every
// HeartbeatInterval until [Lock.Release] or until the lock is lost.
//
// Its fence (docs/adr/0019, 0027) is open while less than 1.25 heartbeat
// intervals have passed since the send time of its last confirmed write:
// [Lock.Err] is nil and store views fenced with the lock ([Lock.Fence])
// write, each write admitted by the fence and bounded by the lease's end.
// After that the lock is suspended — Err matches [ErrSuspended], writes
// are refused, the heartbeat keeps trying and a confirmed heartbeat
// reopens the fence — until the stale window less its margin has passed,
// when it is lost. Loss (that, or a heartbeat that finds
// another holder, a higher epoch, or our record gone) closes [Lock.Lost],
// cancels [Lock.Context] and makes Err match [ErrLost] for good. A Lock is
// safe for concurrent use.
type Lock struct {
	st   *store.Store // internal, unfenced view
	scan scanner
	o    Options
	log  *slog.Logger
	mode Mode
	name string // the object the heartbeat refreshes

	ctx    context.Context
	cancel context.CancelCauseFunc
	// hb bounds the heartbeat's requests: cancelled on loss, and by a
	// Release whose context ends before the heartbeat in flight does,
	// without cancelling ctx (the application's writes are drained).
	hb       context.Context
	hbCancel context.CancelFunc
	lostCh   chan struct{}
	stop     chan struct{} // closed by Release: the heartbeat must end
	done     chan struct{} // closed when the heartbeat goroutine has ended

	stopOnce sync.Once

	mu      sync.Mutex
	state   lockState
	err     error  // why the lock is no longer held
	rec     Record // never a root: acquireCAS confirms a create first
	version string
	// confirmed is when the last write known to be on the store was sent
	// (monotonic and wall clock): the storage stamped it later, so nobody
	// can judge it stale, or watch it miss a heartbeat, any earlier.
	confirmed time.Time
	// suspended records that the fence closed at some point since the
	// last confirmed write (a heartbeat must then re-check before it
	// reopens; lapsedLocked is the one place that decides).
	suspended bool
	// inflight counts the fenced writes admitted by enter and not done;
	// drained is closed once Release has closed the fence and inflight
	// is zero.
	inflight int
	drained  chan struct{}
	// cleanup are objects the acquisition left for the holder to delete.
	// In compare-and-swap mode, the markers below its block: the
	// heartbeat goroutine deletes them first, and Release waits for that.
	// In claims mode, what the acquisition found dead (lower epoch
	// markers, dead claims; docs/adr/0067): the release deletes them
	// with our own, and a crash leaves them to the next acquirer.
	cleanup []string
	// mine are the acquisition ids of this acquisition's attempts: their
	// claims, wherever they turn up (a confirm answered too late that
	// landed anyway), are ours to delete and never a rival.
	mine map[string]bool
	// cleaned is closed once the heartbeat goroutine has deleted what the
	// acquisition left (cleanup, compare-and-swap mode).
	cleaned chan struct{}

	m          *lockMetrics        // nil without a MeterProvider (metrics.go)
	metricsReg metric.Registration // the gauges' callback, until Release
}

func newLock(a *acquirer, name string, rec Record, version string, sent time.Time, cleanup []string) *Lock {
	ctx, cancel := context.WithCancelCause(context.Background())
	hb, hbCancel := context.WithCancel(context.Background())
	l := &Lock{
		hb:        hb,
		hbCancel:  hbCancel,
		drained:   make(chan struct{}),
		st:        a.st,
		scan:      scanner{st: a.scan.st, timeout: a.o.RequestTimeout},
		o:         a.o,
		log:       a.log,
		mode:      a.mode,
		name:      name,
		ctx:       ctx,
		cancel:    cancel,
		lostCh:    make(chan struct{}),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
		rec:       rec,
		version:   version,
		confirmed: sent,
		cleanup:   cleanup,
		mine:      maps.Clone(a.mine),
		m:         a.m,
		cleaned:   make(chan struct{}),
	}
	if l.mine == nil {
		l.mine = map[string]bool{}
	}
	l.mine[rec.AcquisitionID] = true
	l.observe()
	go l.heartbeat()
	return l
}

// Record returns the lock record as last written by this holder.
func (l *Lock) Record() Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rec
}

// Mode returns how the lock is enforced on this store.
func (l *Lock) Mode() Mode { return l.mode }

// guards reports whether l is the lock of st: the same backend and the
// same key prefix (root). Code that writes under the lock's protection, such
// as the migration runner, checks it so that a lock held on one store does
// not license writes to another (internal/lockadmin.Guards).
func (l *Lock) guards(st *store.Store) bool {
	return st != nil && storeadmin.KeyPrefix(st) == storeadmin.KeyPrefix(l.st) && sameBackend(storeadmin.Backend(st), storeadmin.Backend(l.st))
}

// sameBackend compares two backends by identity; a backend of a
// non-comparable type is never the same.
func sameBackend(a, b backend.Backend) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// Err returns nil while the fence is open; an error matching ErrSuspended
// while the lease has run out and no heartbeat has confirmed the lock
// again; a *LostError (matching ErrLost) once it is lost; ErrReleased
// after Release. Stores fenced with the lock ([Lock.Fence]) refuse writes
// while it is not nil.
//
// Err checks the lease itself on both this process's monotonic clock
// (which stands still while a VM is suspended) and its wall clock (which
// jumps forward after), so a process resumed after a pause refuses writes
// before any request is sent, before the heartbeat goroutine gets to run.
func (l *Lock) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != held {
		return l.err
	}
	return l.checkLeaseLocked(time.Now())
}

// deadline returns when the fence closes unless a heartbeat confirms the
// lock again: the send time of the last confirmed write plus 1.25
// heartbeat intervals. Fenced writes run under it (storeadmin.Fence). After
// loss or release it is a time in the past.
func (l *Lock) deadline() (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != held {
		return time.Now().Add(-time.Nanosecond), true
	}
	return l.confirmed.Add(l.o.lease()), true
}

// enter admits one fenced write (storeadmin.Fence): it fails as Err does when
// the fence is not open, and otherwise counts the write as in flight until
// done is called. [Lock.Release] closes the fence, then waits for every
// admitted write to be done before it deletes the lock, so that a write
// that began before Release cannot land after the next holder's first
// write (docs/adr/0026).
func (l *Lock) enter() (done func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != held {
		return nil, l.err
	}
	if err := l.checkLeaseLocked(time.Now()); err != nil {
		return nil, err
	}
	l.inflight++
	var once sync.Once
	return func() { once.Do(l.leave) }, nil
}

// leave ends one admitted write.
func (l *Lock) leave() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inflight--
	if l.inflight == 0 && l.state == released {
		close(l.drained)
	}
}

// Lost returns a channel that is closed when the lock is lost (not when it
// is released).
func (l *Lock) Lost() <-chan struct{} { return l.lostCh }

// Context returns a context that is cancelled when the lock is lost or
// released; context.Cause tells which (a *LostError or ErrReleased). Work
// that must stop with the lock runs under it. Release cancels it only
// after the fenced writes in flight are done. A write cut off by this
// context (or any other) may still have landed: its error says so, and on
// storage with conditional writes it cannot land over a later holder's
// write (docs/adr/0026).
func (l *Lock) Context() context.Context {
	l.Err() // a lease that ran out while nobody looked cancels now
	return l.ctx
}

// elapsedLocked is how long ago the last confirmed write was sent, on the
// later of the two clocks.
func (l *Lock) elapsedLocked(now time.Time) time.Duration {
	return max(now.Sub(l.confirmed), now.Round(0).Sub(l.confirmed.Round(0)))
}

// checkLeaseLocked returns the fence's state at now, declaring the lock
// lost when even the long lease has run out.
func (l *Lock) checkLeaseLocked(now time.Time) error {
	el := l.elapsedLocked(now)
	switch {
	case el >= l.o.leaseLong():
		l.loseLocked(&LostError{cause: lossLeaseExpired, Reason: fmt.Sprintf(
			"no heartbeat was confirmed for %s (stale after %s): another instance may have taken over; stopped writing",
			roundAge(el), l.o.StaleAfter)})
		return l.err
	case el >= l.o.lease():
		l.suspended = true
		return fmt.Errorf("%w: no heartbeat confirmed for %s (heartbeat every %s)", ErrSuspended, roundAge(el), l.o.HeartbeatInterval)
	}
	return nil
}

func (l *Lock) loseLocked(err *LostError) {
	if l.state != held {
		return
	}
	l.state, l.err = lost, err
	l.m.lost(err.cause)
	close(l.lostCh)
	l.cancel(err)
	l.hbCancel()
	attrs := []any{"epoch", l.rec.Epoch, "reason", err.Reason}
	if err.Holder != nil {
		attrs = append(attrs, "new_holder", err.Holder.InstanceID, "new_holder_pid", err.Holder.PID, "new_epoch", err.Holder.Epoch)
	}
	l.log.Error("state lock lost", attrs...)
}

func (l *Lock) lose(err *LostError) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.loseLocked(err)
}

// lapsedLocked decides whether the fence has closed since the last
// confirmed write, as of now: Err saw the lease run out, or it has run out
// by now. It is the one place that decides "suspended", for both modes,
// and a heartbeat asks it after its last request's answer, right before it
// confirms (the models decide there; deciding before the PUT lets a
// heartbeat that outlived the lease reopen unchecked, lock/model
// -DSUSPEND_AT_SEND).
func (l *Lock) lapsedLocked(now time.Time) bool {
	return l.suspended || l.elapsedLocked(now) >= l.o.lease()
}

// confirmFresh confirms a heartbeat's write, sent at sent, unless the
// fence has lapsed since the last confirmed write: then it returns false
// and the caller checks that nobody held the lock meanwhile before it
// calls confirm.
func (l *Lock) confirmFresh(sent time.Time, rec Record, version string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lapsedLocked(time.Now()) {
		return false
	}
	l.confirmLocked(sent, rec, version)
	return true
}

// confirm records a write that is known to be on the store, sent at sent;
// the fence reopens.
func (l *Lock) confirm(sent time.Time, rec Record, version string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.confirmLocked(sent, rec, version)
}

func (l *Lock) confirmLocked(sent time.Time, rec Record, version string) {
	if l.state == released {
		// A heartbeat that Release waited for: its version is what the
		// release's conditional delete needs.
		l.rec, l.version = rec, version
		return
	}
	if l.state != held {
		return
	}
	if sent.After(l.confirmed) {
		l.confirmed = sent
	}
	if l.suspended {
		l.log.Info("state lock confirmed again; writes resume", "epoch", rec.Epoch)
	}
	l.rec, l.version, l.suspended = rec, version, false
}

// heartbeat cleans up after the acquisition, then refreshes the lock every
// HeartbeatInterval (retrying sooner after a failure) and ends on release
// or loss.
func (l *Lock) heartbeat() {
	defer close(l.done)
	l.deleteCleanup()
	close(l.cleaned)
	next := time.NewTimer(l.untilNextBeat())
	defer next.Stop()
	expiry := time.NewTimer(l.untilLost())
	defer expiry.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-l.lostCh:
			return
		case <-expiry.C:
			if l.Err(); l.isOver() {
				return
			}
			expiry.Reset(l.untilLost())
		case <-next.C:
			if l.Err(); l.isOver() {
				return
			}
			var wait time.Duration
			if err := l.beat(); err != nil {
				if l.isOver() {
					return
				}
				wait = max(l.o.HeartbeatInterval/8, 10*time.Millisecond)
				l.log.Warn("state lock heartbeat failed; retrying", "err", err, "retry_in", wait, "fence", l.fenceState())
			} else {
				wait = l.untilNextBeat()
			}
			next.Reset(wait)
			expiry.Reset(l.untilLost())
		}
	}
}

func (l *Lock) isOver() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state != held
}

// fenceState names the fence's state for logs.
func (l *Lock) fenceState() string {
	switch err := l.Err(); {
	case err == nil:
		return "open"
	case errors.Is(err, ErrSuspended):
		return "suspended"
	}
	return "closed"
}

// untilNextBeat is the time until one heartbeat interval after the last
// confirmed write.
func (l *Lock) untilNextBeat() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return max(l.o.HeartbeatInterval-time.Since(l.confirmed), time.Millisecond)
}

// untilLost is how long the long lease lasts from now without another
// confirmed write.
func (l *Lock) untilLost() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return max(l.o.leaseLong()-l.elapsedLocked(time.Now()), time.Millisecond)
}

// beatContext bounds one heartbeat: cut off when Release begins, when the
// lock is lost, and when the long lease runs out. Each of its requests is
// bounded by the request timeout (l.request, and l.scan's own), so that
// one hung request does not eat the lease (the heartbeat is tried again)
// while a backend that fails over to another endpoint within its own
// timeouts still gets to. A bound on the whole heartbeat instead cut off
// the suspended look's later reads on a three-node Garage with a paused
// node, where each request took seconds, until the holder lost its lock
// to nobody.
func (l *Lock) beatContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(l.hb, l.untilLost())
}

// request bounds one of the holder's requests by the request timeout.
func (l *Lock) request(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, l.o.RequestTimeout)
}

// put writes one lock object under the request timeout.
func (l *Lock) put(ctx context.Context, name string, data []byte, o store.PutOptions) (store.Info, error) {
	ctx, cancel := l.request(ctx)
	defer cancel()
	return l.st.Put(ctx, name, data, o)
}

// beat refreshes the lock once. The record's heartbeat and the lease's
// send time are one reading of the clock, so that a judge's second clock
// (docs/adr/0028) measures from no later than the lease does.
func (l *Lock) beat() error {
	if err := l.Err(); err != nil && !errors.Is(err, ErrSuspended) {
		return nil // lost or released meanwhile: nothing to refresh
	}
	ctx, cancel := l.beatContext()
	defer cancel()
	l.mu.Lock()
	rec, version := l.rec, l.version
	l.mu.Unlock()
	sent := time.Now()
	rec.Heartbeat = sent.UTC()
	data, err := rec.encode()
	if err != nil {
		return fmt.Errorf("lock: heartbeat: %w", err)
	}
	if l.mode == ModeCAS {
		err = l.beatCAS(ctx, sent, rec, data, version)
	} else {
		err = l.beatClaims(ctx, sent, rec, data)
	}
	if err != nil {
		return fmt.Errorf("lock: heartbeat: %w", err)
	}
	return nil
}

// beatCAS: a conditional write on our version. Success proves nobody wrote
// the lock object since our last write, which nothing but an operator
// deletes (docs/adr/0066): it confirms, and reopens a suspended fence.
func (l *Lock) beatCAS(ctx context.Context, sent time.Time, rec Record, data []byte, version string) error {
	info, written, err := l.writeOnVersion(ctx, data, version, func(cur *entry) (string, error) {
		switch {
		case cur == nil:
			l.lose(&LostError{cause: lossBroken, Reason: "the lock object was removed (out of band?); stopped writing"})
			return "", nil
		case !cur.readable:
			l.lose(&LostError{Reason: fmt.Sprintf("the lock object was replaced by one this instance cannot read (%v); stopped writing", cur.why)})
			return "", nil
		case cur.rec.released() && cur.rec.AcquisitionID != rec.AcquisitionID:
			l.lose(&LostError{cause: lossBroken, Reason: "the lock was released by someone else (a lock break?); stopped writing"})
			return "", nil
		case cur.rec.AcquisitionID != rec.AcquisitionID || !cur.rec.held():
			other := cur.rec
			l.lose(&LostError{Holder: &other, Reason: "another instance took the lock over; stopped writing"})
			return "", nil
		}
		// Ours, at a version we did not write last: a write of ours that
		// landed, its answer lost. Adopt its version and write again on
		// it; that write confirms (lock/model rule 1: an older write of
		// ours could otherwise confirm a lease from a later send).
		l.mu.Lock()
		l.version = cur.info.Version
		l.mu.Unlock()
		return cur.info.Version, nil
	})
	if written {
		l.confirm(sent, rec, info.Version)
	}
	return err
}

// writeOnVersion writes data to the lock object if it still has version.
// A write the storage refuses (another version, or none) reads the lock
// object as it is now and asks judge: it handles what it finds and
// returns "", or returns the version to write on again (once: a write of
// ours that landed unseen), or an error to return. written reports that
// data was written.
func (l *Lock) writeOnVersion(ctx context.Context, data []byte, version string, judge func(cur *entry) (again string, err error)) (info store.Info, written bool, err error) {
	for adopted := false; ; adopted = true {
		info, err := l.put(ctx, lockName, data, store.PutOptions{IfVersion: version})
		if err == nil {
			return info, true, nil
		}
		if !errors.Is(err, backend.ErrPreconditionFailed) && !errors.Is(err, backend.ErrNotFound) || adopted {
			return store.Info{}, false, err
		}
		// Another writer replaced the object, or a write of ours landed and
		// a retry reported the conflict: the acquisition id tells.
		cur, rerr := l.scan.readLock(ctx)
		if rerr != nil {
			return store.Info{}, false, fmt.Errorf("%w (after %w)", rerr, err)
		}
		if version, err = judge(cur); err != nil || version == "" {
			return store.Info{}, false, err
		}
	}
}

// beatClaims: write our held claim, then list (docs/adr/0020).
func (l *Lock) beatClaims(ctx context.Context, sent time.Time, rec Record, data []byte) error {
	info, err := l.put(ctx, l.name, data, store.PutOptions{})
	if err != nil {
		return err
	}
	v, err := l.scan.scan(ctx)
	if err != nil {
		return err
	}
	v.ageIntentsAt(info.Now)
	lost, err := l.claimsLost(ctx, v, rec, false)
	if err == nil && lost == nil && !l.confirmFresh(sent, rec, info.Version) {
		// The fence lapsed: others may have judged us dead; look as an
		// acquirer would before reopening.
		if lost, err = l.claimsLost(ctx, v, rec, true); err == nil && lost == nil {
			l.confirm(sent, rec, info.Version)
		}
	}
	if err != nil {
		return fmt.Errorf("not confirmed: %w", err)
	}
	if lost != nil {
		l.lose(lost)
		// Our claims are junk now (our heartbeat may just have rewritten
		// one a break had deleted): ours to delete, nobody else's.
		dctx, cancel := l.request(context.WithoutCancel(ctx))
		defer cancel()
		_ = deleteMany(dctx, l.st, l.log, l.name, intentName(rec.AcquisitionID))
		return nil
	}
	l.deleteJunk(ctx, v, rec)
	return nil
}

// claimsLost is the loss a look at the claims shows, or nil: a marker
// above our epoch (a takeover or a break), our claim gone, or — when the
// fence was suspended, so others may have judged us dead — a live claim of
// our id, one we cannot read, a vanished held claim, a held claim above
// our epoch. An error means the look decided nothing: the heartbeat is not
// confirmed and is tried again.
func (l *Lock) claimsLost(ctx context.Context, v view, rec Record, suspended bool) (*LostError, error) {
	if top := v.maxMarker(); top > rec.Epoch {
		le := &LostError{Reason: fmt.Sprintf("epoch %d was confirmed after ours (%d): another instance took the lock over, or it was broken; stopped writing", top, rec.Epoch)}
		le.Holder = l.highestHolder(ctx, v, rec)
		if le.Holder == nil {
			le.cause = lossBroken
		}
		return le, nil
	}
	own := false
	for _, e := range v.helds {
		own = own || e.name == l.name
	}
	if !own {
		return &LostError{cause: lossBroken, Reason: "our claim was removed (by a lock break?); stopped writing"}, nil
	}
	if !suspended {
		return nil, nil
	}
	// Our fence was suspended: within the long lease (not lost yet) only
	// an acquirer with our instance id can have judged our claim dead (it
	// watched it miss a heartbeat); an acquirer with another id waits for
	// the stale window on two clocks (docs/adr/0028), which has not
	// passed. So a live claim with our id, or one we cannot read, may be
	// confirming: yield to it. Other ids' intents are acquirers that will
	// find our claim live and back off.
	a := l.judgeAs()
	now := time.Now()
	confirmed := map[string]bool{}
	for _, e := range v.helds {
		confirmed[e.acq] = true
	}
	var (
		threat   *entry
		vanished []*entry
	)
	for _, e := range append(append([]*entry{}, v.records()...), v.intents...) {
		if l.mine[e.acq] || e.name == l.name || e.kind == kindIntent && confirmed[e.acq] {
			continue
		}
		if e.kind == kindIntent {
			live, err := a.intentLive(ctx, e, now)
			if err != nil {
				return nil, err
			}
			if !live {
				continue
			}
		}
		gone, err := l.scan.read(ctx, e)
		if err != nil {
			// Cannot tell (a node failing over, a timeout): not confirmed,
			// and the fence stays closed; the next heartbeat looks again.
			// Yielding would be as safe, and would end a holder for a
			// storage hiccup during a suspension.
			return nil, fmt.Errorf("reading %s: %w", e.name, err)
		}
		if gone && e.kind == kindIntent {
			// An intent whose id we cannot learn now: an acquirer with our
			// id deletes its intent once its held claim and marker landed,
			// which may be after our listing read them (lock/model
			// -DGONE_INTENT_SKIPPED). Looked for in a second listing below.
			vanished = append(vanished, e)
			continue
		}
		if l.suspendedThreat(a, e, gone, rec, now) {
			threat = e
			break
		}
	}
	if threat == nil && len(vanished) > 0 {
		var lost *LostError
		var err error
		if lost, threat, err = l.relistVanished(ctx, a, vanished, rec, now); lost != nil || err != nil {
			return lost, err
		}
	}
	if threat == nil {
		return nil, nil
	}
	le := &LostError{Reason: fmt.Sprintf("the lock was not confirmed for longer than its lease, and a live claim (%s) of our instance id, or one this instance cannot read, may have judged ours dead; stopped writing", threat.name)}
	if threat.readable {
		h := threat.rec
		le.Holder = &h
	}
	return le, nil
}

// suspendedThreat reports whether a claim read by a suspended heartbeat
// (gone: its GET answered 404) may be confirming a holder other than us.
func (l *Lock) suspendedThreat(a *acquirer, e *entry, gone bool, rec Record, now time.Time) bool {
	switch {
	case gone:
		// A listed held claim vanished (released after a tenure we did not
		// see, lock/model -DGET_404_IGNORED): do not reopen.
		return true
	case e.kind != kindIntent && e.readable && e.rec.Epoch > rec.Epoch:
		// A held claim above our epoch, dead or alive: someone held the
		// lock after us (its marker may not have landed yet; lock/model
		// -DHB_NO_EPOCH_CHECK).
		return true
	case e.kind != kindIntent && a.judge(e, now).kind == vTake:
		return false // stale, dead, junk: nobody confirming
	}
	return !e.readable || e.rec.InstanceID == rec.InstanceID
}

// relistVanished is rule 3 of lock/model/claims.pml: a second listing
// after a suspended heartbeat's GET of a live intent answered 404; it
// returns the loss that listing shows, or the vanished intent's held
// claim that threatens us, or neither. The
// intent's owner deleted it either after its held claim and epoch marker
// landed (an acquirer that confirmed: the marker, and its held claim until
// a release, are in this listing) or when it backed off (nothing of it
// is). Listing again, rather than leaving the heartbeat not confirmed,
// keeps a standby whose intents come and go between our LIST and GET at
// every heartbeat from ending the holder: on a three-node Garage with a
// paused node, where each request took seconds, it did.
func (l *Lock) relistVanished(ctx context.Context, a *acquirer, vanished []*entry, rec Record, now time.Time) (*LostError, *entry, error) {
	v, err := l.scan.scan(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("listing again after %s vanished at its read: %w", vanished[0].name, err)
	}
	if lost, _ := l.claimsLost(ctx, v, rec, false); lost != nil {
		return lost, nil, nil // a marker above our epoch, or our claim gone
	}
	gone := map[string]bool{}
	for _, e := range vanished {
		gone[e.acq] = true
	}
	for _, e := range v.helds {
		if !gone[e.acq] {
			continue
		}
		heldGone, err := l.scan.read(ctx, e)
		if err != nil {
			return nil, nil, fmt.Errorf("reading %s: %w", e.name, err)
		}
		if l.suspendedThreat(a, e, heldGone, rec, now) {
			return nil, e, nil
		}
	}
	return nil, nil, nil
}

// highestHolder reads the held claim with the highest epoch other than
// ours, for the loss report (nil when none reads).
func (l *Lock) highestHolder(ctx context.Context, v view, rec Record) *Record {
	var best *Record
	for _, e := range v.records() {
		if e.acq == rec.AcquisitionID {
			continue
		}
		if gone, err := l.scan.read(ctx, e); err != nil || gone || !e.readable {
			continue
		}
		if best == nil || e.rec.Epoch > best.Epoch {
			r := e.rec
			best = &r
		}
	}
	return best
}

// judgeAs is an acquirer with this lock's identity, to judge others'
// claims with the acquisition's rules.
func (l *Lock) judgeAs() *acquirer {
	hostname := l.rec.Hostname
	return &acquirer{
		st: l.st, scan: l.scan, o: l.o, log: l.log, mode: l.mode,
		self:     process{pid: l.rec.PID, ticks: l.rec.ProcessStartTicks, start: l.rec.ProcessStart, scope: l.rec.ProcessScope},
		hostname: hostname, seen: watcher{}, mine: l.mine,
	}
}

// deleteJunk deletes, while our fence is open, what no one else can be
// using: other held claims (a confirm that landed after its sender gave
// up: nobody can be confirming while our fence is open), intents older
// than the intent window, and markers below our epoch, in one request.
// Our own intent stays until the release. Best effort.
func (l *Lock) deleteJunk(ctx context.Context, v view, rec Record) {
	open := l.Err() == nil
	var junk []string
	for _, e := range v.helds {
		// Our own earlier attempts are ours in any case; others' only
		// while our fence is open.
		if e.name != l.name && (l.mine[e.acq] || open) {
			junk = append(junk, e.name)
		}
	}
	a := l.judgeAs()
	now := time.Now()
	for _, e := range v.intents {
		if e.acq != rec.AcquisitionID && (l.mine[e.acq] || open && a.intentDead(e, now)) {
			junk = append(junk, e.name)
		}
	}
	for _, m := range v.markers {
		if m.epoch < rec.Epoch {
			junk = append(junk, m.name)
		}
	}
	ctx, cancel := l.request(ctx)
	defer cancel()
	_ = deleteMany(ctx, l.st, l.log, junk...)
}

// cleanedUp is closed once the acquisition's clean-up has run.
func (l *Lock) cleanedUp() <-chan struct{} { return l.cleaned }

// deleteCleanup deletes what the acquisition left (best effort), in
// compare-and-swap mode; in claims mode the release does.
func (l *Lock) deleteCleanup() {
	if l.mode != ModeCAS {
		return
	}
	l.mu.Lock()
	names := l.cleanup
	l.cleanup = nil
	l.mu.Unlock()
	if len(names) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(l.ctx), l.o.RequestTimeout)
	defer cancel()
	_ = deleteMany(ctx, l.st, l.log, names...)
}

// Release closes the fence, waits for the fenced writes in flight, stops
// the heartbeat and gives the lock up if it is still ours: in
// compare-and-swap mode one conditional write of a released record on our
// version (docs/adr/0066), in claims mode one multi-object delete of our
// claims and what our acquisition found dead, without a look
// (docs/adr/0067). From the moment Release is called, Err returns
// ErrReleased and fenced stores refuse new writes; a write already
// admitted is waited for until it is answered or cut off at the lease's
// end (docs/adr/0026), and only then is [Lock.Context] cancelled and the
// lock given up, so that the next holder's first write comes after every
// write of ours that was answered. If ctx ends while writes are still in
// flight, nothing is written and the error says so: the lock then goes
// stale on its own.
//
// Releasing a lock that was lost touches nothing and returns an error
// wrapping a *LostError (errors.Is(err, ErrLost)). In compare-and-swap
// mode a lock found taken over at release is left alone with the same
// error; one found gone or broken by an operator, with nobody holding it,
// is logged, not an error. In claims mode the release does not look, so
// it learns only of the losses the heartbeat reported: a takeover the
// heartbeat had not seen yet is not reported (the release then deletes
// our own claims and what was below our epoch, nothing of the new
// holder's). Releasing twice returns nil. If the write or the delete
// fails, the error is returned; the lock then goes stale on its own.
func (l *Lock) Release(ctx context.Context) error {
	defer l.unobserve()
	l.mu.Lock()
	st, lossErr := l.state, l.err
	if st == held {
		l.state, l.err = released, ErrReleased
		if l.inflight == 0 {
			close(l.drained)
		}
	}
	l.mu.Unlock()
	// Let a heartbeat in flight finish rather than cut it off: a write cut
	// off by the client may still land on the server, after the delete
	// below, and bring back a lock (a claim, on storage without
	// conditions) nobody holds. Its requests are bounded by
	// RequestTimeout; ctx ending first cuts it off anyway.
	l.stopOnce.Do(func() { close(l.stop) })
	select {
	case <-l.done:
	case <-ctx.Done():
		l.hbCancel()
		<-l.done
	}
	l.hbCancel()
	switch st {
	case released:
		return nil
	case lost:
		return fmt.Errorf("lock: release: nothing deleted: %w", lossErr)
	}
	drainStart := time.Now()
	select {
	case <-l.drained:
	case <-ctx.Done():
		l.mu.Lock()
		n := l.inflight
		l.mu.Unlock()
		l.cancel(ErrReleased)
		l.log.Warn("state lock: released with fenced writes still in flight; the lock was left to go stale", "writes", n)
		return fmt.Errorf("lock: release: %d fenced writes still in flight, so the lock was left in place to go stale: %w", n, context.Cause(ctx))
	}
	if d := time.Since(drainStart); d > time.Millisecond {
		l.log.Info("state lock: waited for the fenced writes in flight", "waited", d.Round(time.Millisecond))
	}
	l.cancel(ErrReleased)
	var err error
	if l.mode == ModeCAS {
		err = l.releaseCAS(ctx)
	} else {
		err = l.releaseClaims(ctx)
	}
	if err != nil {
		return fmt.Errorf("lock: release: %w", err)
	}
	l.log.Info("state lock released", "epoch", l.rec.Epoch)
	return nil
}

// releaseCAS writes a released record on the version this holder last
// wrote (if-version): our epoch and ceiling, for the next acquisition to
// count on from. Another version is looked at: a heartbeat of ours that
// landed unseen, our release landed with its answer lost, a new holder, or
// a lock object gone or broken (nobody holds it: logged).
func (l *Lock) releaseCAS(ctx context.Context) error {
	rec := l.Record()
	rec.State = stateReleased
	rec.Heartbeat = time.Now().UTC()
	data, err := rec.encode()
	if err != nil {
		return err
	}
	_, _, err = l.writeOnVersion(ctx, data, l.version, func(cur *entry) (string, error) {
		switch {
		case cur == nil:
			l.log.Warn("state lock already gone at release (deleted out of band?)", "epoch", rec.Epoch)
			return "", nil
		case cur.readable && cur.rec.AcquisitionID == rec.AcquisitionID && cur.rec.released():
			return "", nil // ours, landed: its answer was lost
		case cur.readable && cur.rec.released():
			l.log.Warn("state lock broken before release; nobody holds it now", "epoch", rec.Epoch)
			return "", nil
		case cur.readable && cur.rec.AcquisitionID == rec.AcquisitionID:
			// Ours, at a version we did not see: a heartbeat that landed
			// while Release cut off its answer.
			return cur.info.Version, nil
		}
		le := &LostError{Reason: "found another lock at release; left it in place"}
		if cur.readable {
			h := cur.rec
			le.Holder = &h
		}
		l.log.Warn("state lock not ours at release; left in place", "err", le)
		return "", fmt.Errorf("nothing written: %w", le)
	})
	return err
}

// releaseClaims deletes our held claim, our intent and what the
// acquisition found dead, in one request and without a look: a loss the
// heartbeat has not reported is not discovered here (docs/adr/0067), and
// nothing of a successor's is in the list (its claims are its own; its
// marker is above ours, and only markers below ours are deleted).
func (l *Lock) releaseClaims(ctx context.Context) error {
	rec := l.Record()
	l.mu.Lock()
	names := append([]string{l.name, intentName(rec.AcquisitionID)}, l.cleanup...)
	l.cleanup = nil
	l.mu.Unlock()
	return deleteMany(ctx, l.st, l.log, names...)
}
