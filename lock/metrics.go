package lock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The lock's instruments (docs/adr/0024), created on Options.MeterProvider
// when it is set. The four gauges are observed at each collection from the
// [Lock] that [Acquire] returned, from its acquisition until
// [Lock.Release] returns; the counters count every Acquire and every loss.
// They describe one lock per MeterProvider: a process that holds the
// locks of several stores gives each its own provider (or resource).
const (
	// MetricHeld is an observable gauge (unit 1): 1 while the lock is
	// held (its fence open or suspended), 0 once it is lost.
	MetricHeld = "cairn_state.lock.held"
	// MetricSuspended is an observable gauge (unit 1): 1 while the lock
	// is held but its fence is suspended (no heartbeat confirmed within
	// its lease: writes are refused, [ErrSuspended]), else 0.
	MetricSuspended = "cairn_state.lock.suspended"
	// MetricEpoch is an observable gauge (unit {epoch}): the fencing
	// epoch of this holder's acquisition.
	MetricEpoch = "cairn_state.lock.epoch"
	// MetricHeartbeatAge is an observable gauge (unit s): the time since
	// the send time of the last write the lock knows is on the store (the
	// acquisition or the last confirmed heartbeat), on this process's
	// clock. It stays below the heartbeat interval while all is well,
	// passes 1.25 intervals when the fence suspends, and keeps growing
	// after a loss.
	MetricHeartbeatAge = "cairn_state.lock.heartbeat.age"
	// MetricAcquisitions is a counter (unit {acquisition}) of Acquire
	// calls by outcome (AttrOutcome). An Acquire that waits
	// (WaitForStale) or watches counts once, when it returns.
	MetricAcquisitions = "cairn_state.lock.acquisitions"
	// MetricLosses is a counter (unit {loss}) of held locks lost, by
	// reason (AttrLossReason).
	MetricLosses = "cairn_state.lock.losses"
)

// The attributes of the lock's counters; their values are the fixed lists
// below.
const (
	// AttrOutcome is how an Acquire ended: acquired; refused_held (a live
	// instance holds the lock); refused_duplicate (a live process with
	// our instance id holds it, [HeldError].Duplicate); refused_unreadable
	// (a fresh lock this process cannot read, [HeldError].Unreadable);
	// error (anything else: storage errors, a cancelled context, bad
	// Options). A WaitForStale wait cut off by its context counts as the
	// refusal it was waiting on.
	AttrOutcome = "cairn_state.outcome"
	// AttrLossReason is why a held lock was lost: taken_over (another
	// instance's record, claim or epoch was found in our place);
	// broken (our record or claim was removed, or a higher epoch was
	// found with no holder behind it: a lock break); lease_expired (no
	// heartbeat could be confirmed before the stale window less its
	// margin).
	AttrLossReason = "cairn_state.lock.loss.reason"
)

// meterName is the instrumentation scope of the lock's instruments.
const meterName = "github.com/cairnhq/state/lock"

type acqOutcome int

const (
	acqAcquired acqOutcome = iota
	acqRefusedHeld
	acqRefusedDuplicate
	acqRefusedUnreadable
	acqError
	numAcqOutcomes
)

var acqOutcomeNames = [numAcqOutcomes]string{"acquired", "refused_held", "refused_duplicate", "refused_unreadable", "error"}

// lossReason classifies a loss for MetricLosses. The zero value is
// taken_over, the commonest.
type lossReason int

const (
	lossTakenOver lossReason = iota
	lossBroken
	lossLeaseExpired
	numLossReasons
)

var lossReasonNames = [numLossReasons]string{"taken_over", "broken", "lease_expired"}

// acqOutcomeOf classifies Acquire's result.
func acqOutcomeOf(err error) acqOutcome {
	var held *HeldError
	switch {
	case err == nil:
		return acqAcquired
	case !errors.As(err, &held):
		return acqError
	case held.Duplicate:
		return acqRefusedDuplicate
	case held.Unreadable != "":
		return acqRefusedUnreadable
	}
	return acqRefusedHeld
}

// lockMetrics holds the lock's instruments. A nil *lockMetrics is a lock
// without a MeterProvider: every method returns at once.
type lockMetrics struct {
	meter                  metric.Meter
	held, suspended, epoch metric.Int64ObservableGauge
	age                    metric.Float64ObservableGauge
	acquisitions, losses   metric.Int64Counter
	acqOpts                [numAcqOutcomes][]metric.AddOption
	lossOpts               [numLossReasons][]metric.AddOption
}

// newLockMetrics creates the instruments on mp; nil mp gives nil.
func newLockMetrics(mp metric.MeterProvider) (*lockMetrics, error) {
	if mp == nil {
		return nil, nil
	}
	m := &lockMetrics{meter: mp.Meter(meterName)}
	var errs []error
	check := func(name string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("metrics: %s: %w", name, err))
		}
	}
	var err error
	m.held, err = m.meter.Int64ObservableGauge(MetricHeld, metric.WithUnit("1"),
		metric.WithDescription("1 while this instance holds the state lock, 0 once it is lost."))
	check(MetricHeld, err)
	m.suspended, err = m.meter.Int64ObservableGauge(MetricSuspended, metric.WithUnit("1"),
		metric.WithDescription("1 while the state lock is held but its fence is suspended (no heartbeat confirmed within the lease; writes refused)."))
	check(MetricSuspended, err)
	m.epoch, err = m.meter.Int64ObservableGauge(MetricEpoch, metric.WithUnit("{epoch}"),
		metric.WithDescription("Fencing epoch of this instance's acquisition of the state lock."))
	check(MetricEpoch, err)
	m.age, err = m.meter.Float64ObservableGauge(MetricHeartbeatAge, metric.WithUnit("s"),
		metric.WithDescription("Time since the send time of the state lock's last confirmed write (acquisition or heartbeat)."))
	check(MetricHeartbeatAge, err)
	m.acquisitions, err = m.meter.Int64Counter(MetricAcquisitions, metric.WithUnit("{acquisition}"),
		metric.WithDescription("Attempts to acquire the state lock, by outcome."))
	check(MetricAcquisitions, err)
	m.losses, err = m.meter.Int64Counter(MetricLosses, metric.WithUnit("{loss}"),
		metric.WithDescription("Held state locks lost, by reason."))
	check(MetricLosses, err)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for i, name := range acqOutcomeNames {
		m.acqOpts[i] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrOutcome, name)))}
	}
	for i, name := range lossReasonNames {
		m.lossOpts[i] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrLossReason, name)))}
	}
	return m, nil
}

// acquisition counts one Acquire that returned *err; Acquire defers it.
func (m *lockMetrics) acquisition(ctx context.Context, err *error) {
	if m != nil {
		m.acquisitions.Add(ctx, 1, m.acqOpts[acqOutcomeOf(*err)]...)
	}
}

// lost counts one loss.
func (m *lockMetrics) lost(r lossReason) {
	if m != nil {
		m.losses.Add(context.Background(), 1, m.lossOpts[r]...)
	}
}

// observe starts the lock's gauges; Release ends them (unobserve). A
// provider that refuses the callback costs the gauges, not the lock.
func (l *Lock) observe() {
	if l.m == nil {
		return
	}
	reg, err := l.m.meter.RegisterCallback(l.observeGauges, l.m.held, l.m.suspended, l.m.epoch, l.m.age)
	if err != nil {
		l.log.Warn("state lock: the MeterProvider refused the lock's gauges; they are not reported", "err", err)
		return
	}
	l.mu.Lock()
	l.metricsReg = reg
	l.mu.Unlock()
}

// unobserve ends the lock's gauges (idempotent).
func (l *Lock) unobserve() {
	l.mu.Lock()
	reg := l.metricsReg
	l.metricsReg = nil
	l.mu.Unlock()
	if reg != nil {
		_ = reg.Unregister()
	}
}

// observeGauges reports the lock's state at a collection. It reads the
// lease as Err does but changes nothing: a collection never declares the
// lock lost (the heartbeat goroutine or the next Err does that).
func (l *Lock) observeGauges(_ context.Context, o metric.Observer) error {
	l.mu.Lock()
	st, epoch, el := l.state, l.rec.Epoch, l.elapsedLocked(time.Now())
	l.mu.Unlock()
	isHeld := st == held && el < l.o.leaseLong()
	suspended := isHeld && el >= l.o.lease()
	o.ObserveInt64(l.m.held, boolInt(isHeld))
	o.ObserveInt64(l.m.suspended, boolInt(suspended))
	o.ObserveInt64(l.m.epoch, int64(min(epoch, math.MaxInt64)))
	o.ObserveFloat64(l.m.age, max(el, 0).Seconds())
	return nil
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
