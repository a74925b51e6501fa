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
// Its fence (docs/adr/0019) is open while less than 1.25 heartbeat
// intervals have passed since the send time of its last confirmed write:
// [Lock.Err] is nil and fenced store views write, each write bounded by
// [Lock.Deadline]. After that the lock is suspended — Err matches
// [ErrSuspended], writes are refused, the heartbeat keeps trying and a
// confirmed heartbeat reopens the fence — until the stale window less its
// margin has passed, when it is lost. Loss (that, or a heartbeat that finds
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
	lostCh chan struct{}
	stop   chan struct{} // closed by Release: the heartbeat must end
	done   chan struct{} // closed when the heartbeat goroutine has ended

	stopOnce sync.Once

	mu      sync.Mutex
	state   lockState
	err     error // why the lock is no longer held
	rec     Record
	version string
	// confirmed is when the last write known to be on the store was sent
	// (monotonic and wall clock): the storage stamped it later, so nobody
	// can judge it stale, or watch it miss a heartbeat, any earlier.
	confirmed time.Time
	// suspended records that the fence closed at some point since the
	// last confirmed write (claims mode must then re-check like an
	// acquirer before it reopens).
	suspended bool
	// cleanup are objects the acquisition left for the holder to delete
	// (lower epoch markers, dead claims); the heartbeat goroutine deletes
	// them first, and Release waits for that.
	cleanup []string
	// mine are the acquisition ids of this acquisition's attempts: their
	// claims, wherever they turn up (a confirm answered too late that
	// landed anyway), are ours to delete and never a rival.
	mine map[string]bool
	// cleaned is closed once the heartbeat goroutine has deleted what the
	// acquisition left (cleanup).
	cleaned chan struct{}

	m          *lockMetrics        // nil without a MeterProvider (metrics.go)
	metricsReg metric.Registration // the gauges' callback, until Release
}

func newLock(a *acquirer, name string, rec Record, version string, sent time.Time, cleanup []string) *Lock {
	ctx, cancel := context.WithCancelCause(context.Background())
	l := &Lock{
		st:        a.st,
		scan:      a.scan,
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

// Guards reports whether l is the lock of st: the same backend and the
// same key prefix (root). Code that writes under the lock's protection, such
// as the migration runner, checks it so that a lock held on one store does
// not license writes to another.
func (l *Lock) Guards(st *store.Store) bool {
	return st != nil && st.KeyPrefix() == l.st.KeyPrefix() && sameBackend(st.Backend(), l.st.Backend())
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
// after Release. It satisfies store.Fence, with Deadline.
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

// Deadline returns when the fence closes unless a heartbeat confirms the
// lock again: the send time of the last confirmed write plus 1.25
// heartbeat intervals. Fenced writes run under it (store.Fence). After
// loss or release it is a time in the past.
func (l *Lock) Deadline() (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != held {
		return time.Now().Add(-time.Nanosecond), true
	}
	return l.confirmed.Add(l.o.lease()), true
}

// Lost returns a channel that is closed when the lock is lost (not when it
// is released).
func (l *Lock) Lost() <-chan struct{} { return l.lostCh }

// Context returns a context that is cancelled when the lock is lost or
// released; context.Cause tells which (a *LostError or ErrReleased). Work
// that must stop with the lock runs under it.
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

// confirm records a write that is known to be on the store, sent at sent;
// the fence reopens.
func (l *Lock) confirm(sent time.Time, rec Record, version string) {
	l.mu.Lock()
	defer l.mu.Unlock()
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
			wait := l.o.HeartbeatInterval
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
// lock is lost, and by the request timeout, so that one hung request does
// not eat the lease (it is retried) while a backend that fails over to
// another endpoint within its own timeouts still gets to.
func (l *Lock) beatContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(l.ctx, min(l.o.RequestTimeout, l.untilLost()))
}

// beat refreshes the lock once.
func (l *Lock) beat() error {
	if err := l.Err(); err != nil && !errors.Is(err, ErrSuspended) {
		return nil // lost or released meanwhile: nothing to refresh
	}
	ctx, cancel := l.beatContext()
	defer cancel()
	l.mu.Lock()
	rec, version, suspended := l.rec, l.version, l.suspended
	l.mu.Unlock()
	if l.checkSuspended() {
		suspended = true
	}
	rec.Heartbeat = time.Now().UTC()
	data, err := rec.encode()
	if err != nil {
		return err
	}
	if l.mode == ModeCAS {
		return l.beatCAS(ctx, rec, data, version, suspended)
	}
	return l.beatClaims(ctx, rec, data, suspended)
}

// checkSuspended reports whether the fence is suspended now.
func (l *Lock) checkSuspended() bool {
	return errors.Is(l.Err(), ErrSuspended)
}

// beatCAS: a conditional write on our version. Success proves nobody wrote
// the lock since our last confirmed write, so it also reopens a suspended
// fence.
func (l *Lock) beatCAS(ctx context.Context, rec Record, data []byte, version string, suspended bool) error {
	for adopted := false; ; adopted = true {
		sent := time.Now()
		info, err := l.st.Put(ctx, Name, data, store.PutOptions{IfVersion: version})
		if err == nil {
			if suspended {
				// Reopening after a suspension: a conditional write on our
				// version does not prove nobody held the lock meanwhile — a
				// late copy of one of our own writes can land again with the
				// same bytes, so the same version. Every takeover writes an
				// epoch marker first: look for one above ours (found by the
				// model, lock/model -DNO_REOPEN_CHECK).
				v, serr := l.scan.scan(ctx)
				if serr != nil {
					return fmt.Errorf("lock: heartbeat: %w", serr)
				}
				if top := v.maxMarker(); top > rec.Epoch {
					l.lose(&LostError{Reason: fmt.Sprintf("epoch %d was confirmed while our lock was suspended (ours %d): another instance held it meanwhile; stopped writing", top, rec.Epoch)})
					return nil
				}
			}
			l.confirm(sent, rec, info.Version)
			return nil
		}
		if !errors.Is(err, backend.ErrPreconditionFailed) || adopted {
			return fmt.Errorf("lock: heartbeat: %w", err)
		}
		// Another writer replaced the object, or a write of ours landed and
		// a retry reported the conflict: the acquisition id tells.
		v, serr := l.scan.scan(ctx)
		if serr != nil {
			return fmt.Errorf("lock: heartbeat: %w (after %w)", serr, err)
		}
		if v.lock == nil {
			l.lose(&LostError{cause: lossBroken, Reason: "the lock object was removed (by a lock break?); stopped writing"})
			return nil
		}
		gone, rerr := l.scan.read(ctx, v.lock)
		switch {
		case rerr != nil:
			return fmt.Errorf("lock: heartbeat: %w (after %w)", rerr, err)
		case gone:
			l.lose(&LostError{cause: lossBroken, Reason: "the lock object was removed (by a lock break?); stopped writing"})
			return nil
		case !v.lock.readable:
			l.lose(&LostError{Reason: fmt.Sprintf("the lock object was replaced by one this instance cannot read (%v); stopped writing", v.lock.why)})
			return nil
		case v.lock.rec.AcquisitionID != rec.AcquisitionID:
			other := v.lock.rec
			l.lose(&LostError{Holder: &other, Reason: "another instance took the lock over; stopped writing"})
			return nil
		}
		// Ours, at a version we did not write last — it may be an older
		// write of ours landing late, so it confirms nothing: adopt its
		// version and write again on it; that write confirms (found by the
		// model, lock/model -DOURS_CONFIRMS).
		version = v.lock.info.Version
		l.mu.Lock()
		l.version = version
		l.mu.Unlock()
	}
}

// beatClaims: write our held claim, then list (docs/adr/0020).
func (l *Lock) beatClaims(ctx context.Context, rec Record, data []byte, suspended bool) error {
	sent := time.Now()
	info, err := l.st.Put(ctx, l.name, data, store.PutOptions{})
	if err != nil {
		return fmt.Errorf("lock: heartbeat: %w", err)
	}
	v, err := l.scan.scan(ctx)
	if err != nil {
		return fmt.Errorf("lock: heartbeat: %w", err)
	}
	v.ageIntentsAt(info.Now)
	lost, err := l.claimsLost(ctx, v, rec, suspended || l.checkSuspended())
	if err != nil {
		return fmt.Errorf("lock: heartbeat: not confirmed: %w", err)
	}
	if lost != nil {
		l.lose(lost)
		// Our claims are junk now (our heartbeat may just have rewritten
		// one a break had deleted): ours to delete, nobody else's.
		l.deleteNames(context.WithoutCancel(ctx), []string{l.name, intentName(rec.AcquisitionID)})
		return nil
	}
	l.confirm(sent, rec, info.Version)
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
	// the stale window, which has not passed. So a live claim with our id,
	// or one we cannot read, may be confirming: yield to it. Other ids' intents are acquirers that will
	// find our claim live and back off.
	a := l.judgeAs()
	now := time.Now()
	confirmed := map[string]bool{}
	for _, e := range v.helds {
		confirmed[e.acq] = true
	}
	var threat *entry
	for _, e := range append(append([]*entry{}, v.records()...), v.intents...) {
		if l.mine[e.acq] || e.name == l.name || e.kind == kindIntent && confirmed[e.acq] {
			continue
		}
		if e.kind == kindIntent && !a.intentLive(e, now) {
			continue
		}
		gone, err := l.scan.read(ctx, e)
		if err != nil {
			// Cannot tell (a node failing over, a timeout): not confirmed,
			// and the fence stays closed; the next heartbeat looks again.
			// Yielding would be as safe, and would end a holder for a
			// storage hiccup during a suspension.
			return nil, fmt.Errorf("reading %s: %w", e.name, err)
		}
		if gone {
			if e.kind == kindIntent {
				// An intent whose id we cannot learn now: an acquirer with
				// our id deletes its intent once its held claim and marker
				// landed, which may be after our listing read them
				// (lock/model -DGONE_INTENT_SKIPPED). Not confirmed: the
				// next heartbeat's listing shows that held claim if there
				// is one. (Yielding is as safe, but ends a holder whenever
				// a standby's intent comes and goes between our LIST and
				// GET.)
				return nil, fmt.Errorf("intent %s vanished between the listing and its read", e.name)
			}
			// A listed held claim vanished (released after a tenure we did
			// not see, lock/model -DGET_404_IGNORED): do not reopen.
			threat = e
			break
		}
		if e.kind != kindIntent && e.readable && e.rec.Epoch > rec.Epoch {
			// A held claim above our epoch, dead or alive: someone held the
			// lock after us (its marker may not have landed yet; lock/model
			// -DHB_NO_EPOCH_CHECK).
			threat = e
			break
		}
		if e.kind != kindIntent {
			if vd := a.judge(e, now); vd.kind == vTake {
				continue // stale, dead, junk: nobody confirming
			}
		}
		if !e.readable || e.rec.InstanceID == rec.InstanceID {
			threat = e
			break
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
// up: nobody can be confirming while our fence is open) and intents older
// than the intent window. Best effort.
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
		if l.mine[e.acq] || open && !a.intentLive(e, now) {
			junk = append(junk, e.name)
		}
	}
	for _, m := range v.markers {
		if m.epoch < rec.Epoch {
			junk = append(junk, m.name)
		}
	}
	l.deleteNames(ctx, junk)
}

// cleanedUp is closed once the acquisition's clean-up has run.
func (l *Lock) cleanedUp() <-chan struct{} { return l.cleaned }

// deleteCleanup deletes what the acquisition left (best effort).
func (l *Lock) deleteCleanup() {
	l.mu.Lock()
	names := l.cleanup
	l.cleanup = nil
	l.mu.Unlock()
	if len(names) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(l.ctx), l.o.RequestTimeout)
	defer cancel()
	l.deleteNames(ctx, names)
}

func (l *Lock) deleteNames(ctx context.Context, names []string) {
	for _, name := range names {
		if err := l.st.Delete(ctx, name, store.DeleteOptions{}); err != nil && !errors.Is(err, backend.ErrNotFound) {
			l.log.Debug("state lock: could not delete a leftover lock object", "object", name, "err", err)
		}
	}
}

// Release stops the heartbeat and removes the lock if it is still ours: in
// compare-and-swap mode a conditional delete of our version, in claims mode
// our claims after a look that shows no higher epoch. From the moment
// Release is called, Err returns ErrReleased and fenced stores refuse
// writes.
//
// Releasing a lock that was lost, or that turns out at release to have
// been taken over, deletes nothing of the new holder's and returns an
// error wrapping a *LostError (errors.Is(err, ErrLost)). A lock already
// gone with no new holder (broken by an operator) is logged, not an error.
// Releasing twice returns nil. If the delete fails, the error is returned;
// the lock then goes stale on its own.
func (l *Lock) Release(ctx context.Context) error {
	defer l.unobserve()
	l.mu.Lock()
	st, lossErr := l.state, l.err
	if st == held {
		l.state, l.err = released, ErrReleased
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
	}
	l.cancel(ErrReleased)
	<-l.done
	switch st {
	case released:
		return nil
	case lost:
		return fmt.Errorf("lock: release: nothing deleted: %w", lossErr)
	}
	var err error
	if l.mode == ModeCAS {
		err = l.releaseCAS(ctx)
	} else {
		err = l.releaseClaims(ctx)
	}
	if err == nil {
		l.log.Info("state lock released", "epoch", l.rec.Epoch)
	}
	return err
}

func (l *Lock) releaseCAS(ctx context.Context) error {
	err := l.st.Delete(ctx, Name, store.DeleteOptions{IfVersion: l.version})
	if err == nil {
		return nil
	}
	if !errors.Is(err, backend.ErrPreconditionFailed) && !errors.Is(err, backend.ErrNotFound) {
		return fmt.Errorf("lock: release: %w", err)
	}
	v, serr := l.scan.scan(ctx)
	if serr != nil {
		return fmt.Errorf("lock: release: %w (after %w)", serr, err)
	}
	if v.lock == nil {
		l.log.Warn("state lock already gone at release (broken?)", "epoch", l.rec.Epoch)
		return nil
	}
	le := &LostError{Reason: "found another lock at release; left it in place"}
	if gone, rerr := l.scan.read(ctx, v.lock); rerr == nil && !gone && v.lock.readable {
		if v.lock.rec.AcquisitionID == l.rec.AcquisitionID {
			// Ours, at a version we did not see: a heartbeat that landed
			// while Release cut off its answer.
			if err := l.st.Delete(ctx, Name, store.DeleteOptions{IfVersion: v.lock.info.Version}); err != nil && !errors.Is(err, backend.ErrNotFound) {
				return fmt.Errorf("lock: release: %w", err)
			}
			return nil
		}
		rec := v.lock.rec
		le.Holder = &rec
	}
	l.log.Warn("state lock not ours at release; left in place", "err", le)
	return fmt.Errorf("lock: release: nothing deleted: %w", le)
}

func (l *Lock) releaseClaims(ctx context.Context) error {
	v, err := l.scan.scan(ctx)
	if err != nil {
		return fmt.Errorf("lock: release: %w", err)
	}
	rec := l.Record()
	var lossErr error
	if top := v.maxMarker(); top > rec.Epoch {
		le := &LostError{Reason: fmt.Sprintf("epoch %d was confirmed after ours (%d)", top, rec.Epoch), Holder: l.highestHolder(ctx, v, rec)}
		if le.Holder == nil {
			l.log.Warn("state lock broken before release; nobody holds it now", "epoch", rec.Epoch, "marker", top)
		} else {
			l.log.Warn("state lock not ours at release; left the new holder's claim in place", "err", le)
			lossErr = fmt.Errorf("lock: release: %w", le)
		}
	}
	// Our own claims are ours to delete in any case.
	for _, name := range []string{l.name, intentName(rec.AcquisitionID)} {
		present := false
		for _, e := range append(append([]*entry{}, v.helds...), v.intents...) {
			present = present || e.name == name
		}
		if !present {
			continue
		}
		if err := l.st.Delete(ctx, name, store.DeleteOptions{}); err != nil && !errors.Is(err, backend.ErrNotFound) {
			return errors.Join(lossErr, fmt.Errorf("lock: release: %w", err))
		}
	}
	return lossErr
}
