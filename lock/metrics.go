package lock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/cairnhq/state/internal/metricname"
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

// lossReason classifies a loss for metricname.LockLosses. The zero value is
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
	m.held, err = m.meter.Int64ObservableGauge(metricname.LockHeld, metric.WithUnit("1"),
		metric.WithDescription("1 while this instance holds the state lock, 0 once it is lost."))
	check(metricname.LockHeld, err)
	m.suspended, err = m.meter.Int64ObservableGauge(metricname.LockSuspended, metric.WithUnit("1"),
		metric.WithDescription("1 while the state lock is held but its fence is suspended (no heartbeat confirmed within the lease; writes refused)."))
	check(metricname.LockSuspended, err)
	m.epoch, err = m.meter.Int64ObservableGauge(metricname.LockEpoch, metric.WithUnit("{epoch}"),
		metric.WithDescription("Fencing epoch of this instance's acquisition of the state lock."))
	check(metricname.LockEpoch, err)
	m.age, err = m.meter.Float64ObservableGauge(metricname.LockHeartbeatAge, metric.WithUnit("s"),
		metric.WithDescription("Time since the send time of the state lock's last confirmed write (acquisition or heartbeat)."))
	check(metricname.LockHeartbeatAge, err)
	m.acquisitions, err = m.meter.Int64Counter(metricname.LockAcquisitions, metric.WithUnit("{acquisition}"),
		metric.WithDescription("Attempts to acquire the state lock, by outcome."))
	check(metricname.LockAcquisitions, err)
	m.losses, err = m.meter.Int64Counter(metricname.LockLosses, metric.WithUnit("{loss}"),
		metric.WithDescription("Held state locks lost, by reason."))
	check(metricname.LockLosses, err)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for i, name := range acqOutcomeNames {
		m.acqOpts[i] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String(metricname.AttrOutcome, name)))}
	}
	for i, name := range lossReasonNames {
		m.lossOpts[i] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String(metricname.AttrLossReason, name)))}
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
