package lock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"time"

	"github.com/google/uuid"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/driver"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/store"
)

// maxConflicts bounds how often Acquire starts over after a conflict, an
// ambiguous write failure or an abandoned attempt before giving up. Waiting
// for a live holder, watching a record and backing off from a racing
// acquirer do not count.
const maxConflicts = 8

// Acquire takes the instance lock of st, or refuses with a *HeldError
// (errors.Is(err, ErrHeld)) naming the live holder, whose lock it leaves
// untouched. st must be an unfenced store: the lock writes its own objects
// through the store's reserved-name view. ctx bounds the acquisition only;
// the lock, once held, lives until [Lock.Release] or until it is lost.
//
// The rules (docs/adr/0019): a lock that is stale on the storage's clock
// (cross-checked, see the ADR), or watched unchanged for the whole stale
// window, is taken over; so is a lock whose holder ran in this PID space
// and is dead or whose PID was reused. A live holder in this PID space is
// refused — as a duplicate instance id when it has ours. A holder with our
// instance id that cannot be probed (another host or PID namespace) is
// watched for one heartbeat and a half: taken over if it did not refresh
// its record, refused as a duplicate if it did. An unreadable lock (a key
// this process does not hold, garbage, a corrupt object file) is refused
// until it is stale, then taken over with a warning. Otherwise the lock is
// held by a live instance: refused, or waited for with
// Options.WaitForStale.
//
// The protocol depends on the backend (docs/adr/0019, 0020): compare-and-swap
// where it enforces put and delete conditions, claims otherwise. Either way
// every acquisition whose fence opens has an epoch one above every earlier
// one.
func Acquire(ctx context.Context, st *store.Store, opts Options) (_ *Lock, err error) {
	m, err := newLockMetrics(opts.MeterProvider)
	if err != nil {
		return nil, fmt.Errorf("lock: acquire: %w", err)
	}
	defer m.acquisition(ctx, &err)
	o, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("lock: acquire: %w", err)
	}
	in := storeadmin.Internal(st)
	caps, err := driver.ResolveCapabilities(ctx, storeadmin.Backend(in))
	if err != nil {
		return nil, fmt.Errorf("lock: acquire: %w", err)
	}
	mode := o.Mode
	switch {
	case mode == ModeCAS && !caps.ConditionalWrites:
		return nil, fmt.Errorf("lock: acquire: compare-and-swap mode asked for, but the backend has no conditional writes: %w", backend.ErrUnsupported)
	case mode == "" && caps.ConditionalWrites:
		mode = ModeCAS
	case mode == "":
		mode = ModeClaims
	}
	hostname, _ := os.Hostname()
	a := &acquirer{
		st:       in,
		scan:     scanner{st: in},
		o:        o,
		log:      o.Logger.With("instance", o.InstanceID),
		self:     selfProcess(),
		hostname: hostname,
		mode:     mode,
		seen:     watcher{},
		m:        m,
	}
	if mode == ModeCAS {
		return a.acquireCAS(ctx)
	}
	return a.acquireClaims(ctx)
}

type acquirer struct {
	st       *store.Store
	scan     scanner
	o        Options
	log      *slog.Logger
	self     process
	hostname string
	mode     Mode
	seen     watcher
	// mine are this acquisition's attempts (claims mode): their claims
	// are ours to delete wherever they turn up.
	mine map[string]bool
	// backoffs counts the back-offs from racing acquirers.
	backoffs int
	m        *lockMetrics // nil without a MeterProvider
}

// record is this process's lock record for one attempt.
// Its acquisition and heartbeat times are now, the send time its lease
// counts from.
func (a *acquirer) record(acq, state string, epoch uint64, now time.Time) Record {
	now = now.UTC()
	return Record{
		InstanceID:        a.o.InstanceID,
		Hostname:          a.hostname,
		PID:               a.self.pid,
		ProcessStartTicks: a.self.ticks,
		ProcessStart:      a.self.start,
		ProcessScope:      a.self.scope,
		AcquiredAt:        now,
		Heartbeat:         now,
		Epoch:             epoch,
		Mode:              a.mode,
		State:             state,
		StaleAfter:        a.o.StaleAfter,
		HeartbeatInterval: a.o.HeartbeatInterval,
		AcquisitionID:     acq,
	}
}

// request bounds one of the lock's requests.
func (a *acquirer) request(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, a.o.RequestTimeout)
}

// decision is the outcome of judging everything a look found.
type decision struct {
	kind verdictKind // vTake means "go ahead"
	// held is the refusal (vRefuse), or what is being watched (vWatch).
	held    *HeldError
	recheck time.Duration
	// takeovers are the records we may take over or clean up, with why.
	takeovers []takenOver
	// backoff: another acquisition is in progress; start over later.
	backoff bool
}

type takenOver struct {
	e      *entry
	reason string
	warn   bool
}

// add folds one record's verdict into the decision: any refusal wins,
// then any watch (the soonest recheck), else every takeover is listed.
func (d *decision) add(e *entry, vd verdict) {
	switch vd.kind {
	case vRefuse:
		if d.kind != vRefuse {
			d.kind, d.held, d.recheck = vRefuse, vd.held, vd.recheck
		}
	case vWatch:
		switch d.kind {
		case vTake:
			d.kind, d.held, d.recheck = vWatch, vd.held, vd.recheck
		case vWatch:
			d.recheck = min(d.recheck, vd.recheck)
		}
	case vTake:
		d.takeovers = append(d.takeovers, takenOver{e: e, reason: vd.reason, warn: vd.warn})
	}
}

// decide judges every record of a claims look other than our own
// acquisition's (own is the acquisition id of our current attempt,
// ignored): any live holder refuses; anything undecided is watched; an
// intent of another live acquisition makes us back off. A lock object of
// compare-and-swap mode (a store whose mode is claims has none, ADR 0032)
// is judged like a held claim, unless it is released.
func (a *acquirer) decide(ctx context.Context, v view, own string) (d decision, err error) {
	now := time.Now()
	d.kind = vTake
	consider := func(e *entry) error {
		if !e.read {
			gone, err := a.scan.read(ctx, e)
			if err != nil {
				return err
			}
			if gone {
				// Listed, then gone: released (or broken) between the
				// listing and the read — its epoch marker may not have
				// been in the listing yet. Look again rather than count
				// on from what this look saw (lock/model -DGET_404_IGNORED).
				d.backoff = true
				return nil
			}
		}
		if e.released() {
			return nil
		}
		d.add(e, a.judge(e, now))
		return nil
	}
	for _, e := range v.records() {
		if e.acq != "" && (e.acq == own || a.mine[e.acq]) {
			continue
		}
		if err := consider(e); err != nil {
			return decision{}, err
		}
	}
	for _, e := range v.unknown {
		// A name the lock did not write: reported, and judged as an
		// unreadable lock (by its age), never trusted.
		a.log.Warn("state lock: an object under the lock's prefix has a name the lock does not write; judged as an unreadable lock", "object", e.name)
		e.read, e.why = true, fmt.Errorf("%w: a name the lock does not write", errMalformed)
		if err := consider(e); err != nil {
			return decision{}, err
		}
	}
	confirmed := map[string]bool{}
	for _, e := range v.helds {
		confirmed[e.acq] = true
	}
	for _, e := range v.intents {
		// An intent whose held claim exists is superseded by it (its
		// holder crashed before deleting it, say): the held claim is
		// judged instead.
		if e.acq == own || a.mine[e.acq] || confirmed[e.acq] {
			continue
		}
		live, err := a.intentLive(ctx, e, now)
		if err != nil {
			return decision{}, err
		}
		d.backoff = d.backoff || live
	}
	return d, nil
}

// dispatch carries out a decision that is not "go ahead": it waits for a
// refusal (WaitForStale) or returns it, sleeps before a watched record is
// looked at again, or backs off from a racing acquirer; nil means look
// again. go reports a decision to go ahead (nothing done).
func (a *acquirer) dispatch(ctx context.Context, d decision, attempt time.Duration) (goAhead bool, err error) {
	switch {
	case d.kind == vRefuse:
		return false, a.wait(ctx, d)
	case d.kind == vWatch:
		return false, a.watch(ctx, d)
	case d.backoff:
		if err := a.backoff(ctx, attempt); err != nil {
			return false, fmt.Errorf("lock: acquire: %w", err)
		}
		return false, nil
	}
	return true, nil
}

// nextEpoch is one above every epoch in sight: the highest marker and
// every readable record.
func (a *acquirer) nextEpoch(v view) (uint64, error) {
	top, from := v.maxMarker(), "epoch marker"
	if len(v.markers) > 0 {
		from = v.markers[len(v.markers)-1].name
	}
	for _, e := range v.records() {
		if e.readable && e.rec.Epoch > top {
			top, from = e.rec.Epoch, e.name
		}
	}
	if top == math.MaxUint64 {
		return 0, epochExhausted(from, top)
	}
	return top + 1, nil
}

// writeMarker writes the epoch marker of e (if absent where the backend
// has conditions): in claims mode, that epoch e was confirmed; in
// compare-and-swap mode, which always has them, the reservation of the
// block whose ceiling is e (ErrPreconditionFailed: another acquisition
// reserved it).
func (a *acquirer) writeMarker(ctx context.Context, e uint64, acq string) error {
	data, err := encodeMarker(e, a.o.InstanceID, acq)
	if err != nil {
		return err
	}
	var po store.PutOptions
	if storeadmin.ConditionalWrites(a.st) {
		po.IfAbsent = true
	}
	rctx, cancel := a.request(ctx)
	defer cancel()
	if _, err := a.st.Put(rctx, markerName(e), data, po); err != nil {
		return fmt.Errorf("write epoch marker %d: %w", e, err)
	}
	return nil
}

// permanent reports errors that no retry mends.
func permanent(err error) bool {
	for _, target := range []error{
		backend.ErrUnsupported, backend.ErrPermission, store.ErrFenced, store.ErrTooLarge,
		store.ErrInvalidName, store.ErrInvalidRoot, ErrEpochExhausted, backend.ErrInvalidKey,
		store.ErrRolledBack,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// pause waits d (jittered by ±20 %), or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	d = time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// backoff waits a random time that grows with the back-offs so far and with
// how long the last attempt took, so that racing acquirers spread out.
func (a *acquirer) backoff(ctx context.Context, attempt time.Duration) error {
	a.backoffs++
	base := max(2*attempt, 5*time.Millisecond) << min(a.backoffs-1, 5)
	base = min(base, a.o.HeartbeatInterval)
	return pause(ctx, time.Duration(rand.Int64N(int64(base))+1))
}

// wait handles a refusal under WaitForStale: it logs, sleeps and returns
// nil to look again, or returns the refusal (or the context's end).
func (a *acquirer) wait(ctx context.Context, d decision) error {
	if !a.o.WaitForStale {
		return d.held
	}
	a.log.Info("waiting for the state lock", "holder", d.held.holderName(), "pid", d.held.Holder.PID,
		"duplicate", d.held.Duplicate, "heartbeat_age", roundAge(d.held.HeartbeatAge), "stale_in", roundAge(d.held.StaleIn))
	if err := pause(ctx, d.recheck); err != nil {
		return waitErr(ctx, d.held)
	}
	return nil
}

// watch sleeps until a watched record is looked at again.
func (a *acquirer) watch(ctx context.Context, d decision) error {
	a.log.Info("state lock: watching the lock before deciding", "holder", d.held.holderName(), "object", d.held.Object,
		"duplicate_if_refreshed", d.held.Duplicate, "recheck", d.recheck)
	if err := pause(ctx, d.recheck); err != nil {
		return waitErr(ctx, d.held)
	}
	return nil
}

func waitErr(ctx context.Context, held *HeldError) error {
	return fmt.Errorf("lock: acquire: waiting for %s to release the lock or go stale: %w (last seen: %w)", held.holderName(), context.Cause(ctx), held)
}

// logTakeovers reports what the acquisition replaced.
func (a *acquirer) logTakeovers(ts []takenOver, attrs ...any) {
	for _, t := range ts {
		if t.warn {
			a.log.Warn("state lock taken over: "+t.reason, attrs...)
		} else {
			a.log.Info("state lock taken over: "+t.reason, attrs...)
		}
	}
}

func newAcquisitionID() string { return uuid.NewString() }
