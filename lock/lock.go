package lock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

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
// HeartbeatInterval until [Lock.Release] or until the lock is lost; loss
// closes [Lock.Lost], cancels [Lock.Context] and makes [Lock.Err] (and so
// every store view fenced with the lock) refuse writes. A Lock is safe for
// concurrent use.
type Lock struct {
	st   *store.Store // internal, unfenced view
	o    Options
	log  *slog.Logger
	mode Mode

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
	// (monotonic and wall clock). The storage stamped it later, so others
	// cannot judge the lock stale before confirmed+StaleAfter.
	confirmed time.Time
	// unconfirmed is when the oldest write sent since then was sent (zero
	// when none): if a read shows it landed, it counts from there.
	unconfirmed time.Time
	// saved is the epoch object as the acquisition read it (nil when it
	// did not read it); Release writes against its version first.
	saved *savedEpoch
}

func newLock(a *acquirer, rec Record, version string, sent time.Time, saved *savedEpoch) *Lock {
	ctx, cancel := context.WithCancelCause(context.Background())
	l := &Lock{
		st:        a.st,
		o:         a.o,
		log:       a.log,
		mode:      a.mode,
		ctx:       ctx,
		cancel:    cancel,
		lostCh:    make(chan struct{}),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
		rec:       rec,
		version:   version,
		confirmed: sent,
		saved:     saved,
	}
	if l.confirmed.IsZero() {
		l.confirmed = time.Now()
	}
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

// Err returns nil while the lock is held, a *LostError (matching ErrLost)
// once it is lost, and ErrReleased after Release. It satisfies store.Fence:
// a store view made with st.WithFence(l) refuses writes once Err is not
// nil.
//
// Err also checks the lease itself: if no refresh has been confirmed for
// StaleAfter less a safety margin (the process was paused, the storage
// unreachable), the
// lock counts as lost at once, before the heartbeat goroutine gets to run,
// because another instance may be about to take it over.
func (l *Lock) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state == held {
		l.checkLeaseLocked(time.Now())
	}
	return l.err
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

// checkLeaseLocked declares the lock lost when the lease has run out on
// either clock: the monotonic one (which stands still while a VM is
// suspended) or the wall clock (which jumps forward after it).
func (l *Lock) checkLeaseLocked(now time.Time) {
	h := l.o.leaseHorizon()
	if now.Sub(l.confirmed) < h && now.Round(0).Sub(l.confirmed.Round(0)) < h {
		return
	}
	l.loseLocked(&LostError{Reason: fmt.Sprintf(
		"no heartbeat was confirmed for %s (stale after %s): another instance may have taken over; stopped writing",
		roundAge(now.Sub(l.confirmed)), l.o.StaleAfter)})
}

func (l *Lock) loseLocked(err *LostError) {
	if l.state != held {
		return
	}
	l.state, l.err = lost, err
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

// heartbeat refreshes the lock every HeartbeatInterval, retries sooner
// after a failure, and ends on release or loss.
func (l *Lock) heartbeat() {
	defer close(l.done)
	next := time.NewTimer(l.o.HeartbeatInterval)
	defer next.Stop()
	lease := time.NewTimer(l.leaseLeft())
	defer lease.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-l.lostCh:
			return
		case <-lease.C:
			if l.Err() != nil {
				return
			}
			lease.Reset(l.leaseLeft())
		case <-next.C:
			if l.Err() != nil {
				return
			}
			wait := l.o.HeartbeatInterval
			if err := l.beat(); err != nil {
				if l.Err() != nil {
					return
				}
				wait = max(l.o.HeartbeatInterval/4, time.Millisecond)
				l.log.Warn("state lock heartbeat failed; retrying", "err", err, "retry_in", wait, "lease_left", roundAge(l.leaseLeft()))
			}
			next.Reset(wait)
			lease.Reset(l.leaseLeft())
		}
	}
}

// leaseLeft is how long the lease lasts from now without another confirmed
// refresh.
func (l *Lock) leaseLeft() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return max(l.o.leaseHorizon()-time.Since(l.confirmed), 0)
}

// beat refreshes the lock once. Its requests are cut off when the lease
// runs out or Release begins.
func (l *Lock) beat() error {
	// l.ctx ends when Release begins; the timeout when the lease runs out.
	ctx, cancel := context.WithTimeout(l.ctx, l.leaseLeft())
	defer cancel()

	l.mu.Lock()
	rec, version := l.rec, l.version
	l.mu.Unlock()

	if l.mode == ModeAdvisory {
		// No compare-and-swap: check the object is still ours, then write.
		obs, err := observe(ctx, l.st, false)
		if err != nil {
			return err
		}
		if !l.stillOurs(obs) {
			return nil
		}
		version = obs.info.Version
	}
	rec.Heartbeat = time.Now().UTC()
	data, err := rec.encode()
	if err != nil {
		return err
	}
	var po store.PutOptions
	if l.mode == ModeCAS {
		po.IfVersion = version
	}
	sent := time.Now()
	l.noteSent(sent)
	info, err := l.st.Put(ctx, Name, data, po)
	if err == nil {
		l.confirm(sent, rec, info.Version)
		return nil
	}
	if !errors.Is(err, backend.ErrPreconditionFailed) {
		return fmt.Errorf("lock: heartbeat: %w", err)
	}
	// Another writer replaced the object, or our own write landed and a
	// retry reported the conflict: the acquisition id tells.
	obs, oerr := observe(ctx, l.st, false)
	if oerr != nil {
		return fmt.Errorf("lock: heartbeat: %w (after %w)", oerr, err)
	}
	if l.stillOurs(obs) {
		l.mu.Lock()
		if l.state == held {
			l.rec, l.version = obs.rec, obs.info.Version
			l.confirmed, l.unconfirmed = l.unconfirmed, time.Time{}
		}
		l.mu.Unlock()
	}
	return nil
}

// stillOurs reports whether obs shows our acquisition, and declares the
// lock lost when it shows anything else.
func (l *Lock) stillOurs(obs observation) bool {
	switch {
	case obs.readable && obs.rec.AcquisitionID == l.rec.AcquisitionID:
		return true
	case !obs.present:
		l.lose(&LostError{Reason: "the lock object was removed (by a lock break?); stopped writing"})
	case !obs.readable:
		l.lose(&LostError{Reason: fmt.Sprintf("the lock object was replaced by one this instance cannot read (%v); stopped writing", obs.why)})
	default:
		rec := obs.rec
		l.lose(&LostError{Holder: &rec, Reason: "another instance took the lock over; stopped writing"})
	}
	return false
}

func (l *Lock) noteSent(t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.unconfirmed.IsZero() {
		l.unconfirmed = t
	}
}

func (l *Lock) confirm(sent time.Time, rec Record, version string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != held {
		return
	}
	l.rec, l.version, l.confirmed, l.unconfirmed = rec, version, sent, time.Time{}
}

// Release stops the heartbeat and deletes the lock object if it is still
// ours: it reads the object first and deletes it only if it carries our
// acquisition id (conditionally on its version where the backend can), so
// a lock that another instance took over is never removed. Just before the
// delete it saves the lock's epoch in [EpochName] (compare-and-swap where
// the backend can, never lowering it), so that the next acquisition's
// epoch is one more; if that save fails, the lock object is left to go
// stale and the error is returned. From the moment
// Release is called, Err returns ErrReleased and fenced stores refuse
// writes.
//
// Releasing a lock that was lost, or that turns out at release to carry
// another acquisition, deletes nothing and returns an error wrapping a
// *LostError (errors.Is(err, ErrLost)). A lock object already gone (broken
// by an operator) is not an error. Releasing twice returns nil. If the delete fails, the error
// is returned; the lock object then goes stale on its own.
func (l *Lock) Release(ctx context.Context) error {
	l.mu.Lock()
	st, lossErr := l.state, l.err
	if st == held {
		l.state, l.err = released, ErrReleased
		l.cancel(ErrReleased)
	}
	l.mu.Unlock()
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.done
	switch st {
	case released:
		return nil
	case lost:
		return fmt.Errorf("lock: release: nothing deleted: %w", lossErr)
	}

	obs, err := observe(ctx, l.st, false)
	if err != nil {
		return fmt.Errorf("lock: release: %w", err)
	}
	switch {
	case !obs.present:
		l.log.Warn("state lock already gone at release (broken?)", "epoch", l.rec.Epoch)
		return nil
	case !obs.readable || obs.rec.AcquisitionID != l.rec.AcquisitionID:
		// Lost without our heartbeat noticing (a takeover since the last
		// beat): leave it to its new holder and say so.
		le := &LostError{Reason: "found another lock at release; left it in place"}
		if obs.readable {
			rec := obs.rec
			le.Holder = &rec
		}
		l.log.Warn("state lock not ours at release; left in place", "err", le)
		return fmt.Errorf("lock: release: nothing deleted: %w", le)
	}
	// Save the epoch before the lock object goes, so that the next
	// acquisition counts on from it. If it cannot be saved the lock is
	// left in place: it goes stale on its own, and its epoch with it.
	if err := saveEpoch(ctx, l.st, l.rec, l.saved, l.log); err != nil {
		return fmt.Errorf("lock: release: lock left in place: %w", err)
	}
	var do store.DeleteOptions
	if l.mode == ModeCAS {
		do.IfVersion = obs.info.Version
	}
	if err := l.st.Delete(ctx, Name, do); err != nil && !errors.Is(err, backend.ErrNotFound) {
		return fmt.Errorf("lock: release: %w", err)
	}
	l.log.Info("state lock released", "epoch", l.rec.Epoch)
	return nil
}
