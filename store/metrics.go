package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/metricname"
)

// meterName is the instrumentation scope of the store's instruments.
const meterName = "github.com/cairnhq/state/store"

// op is a store operation as counted.
type op int

const (
	opGet op = iota
	opPut
	opDelete
	opList
	opUpdate
	opStat
	opKeep
	opPrune
	numOps
)

var opNames = [numOps]string{"get", "put", "delete", "list", "update", "stat", "history_keep", "history_prune"}

// outcome is how an operation ended, as counted.
type outcome int

const (
	outOK outcome = iota
	outNotFound
	outPrecondition
	outConflict
	outFenced
	outUnsupported
	outInvalidName
	outTooLarge
	outUnreadable
	outPermission
	outCanceled
	outTimeout
	outError
	numOutcomes
)

var outcomeNames = [numOutcomes]string{
	"ok", "not_found", "precondition_failed", "conflict", "fenced", "unsupported",
	"invalid_name", "too_large", "unreadable", "permission", "canceled", "timeout", "error",
}

// outcomeOf classifies an operation's error. The order matters: a fenced
// write cut off by the lease's deadline also wraps the context's error, an
// update conflict also matches ErrPreconditionFailed, and an object over
// the size limit on read also matches ErrUnreadable.
func outcomeOf(err error) outcome {
	switch {
	case err == nil:
		return outOK
	case errors.Is(err, ErrFenced):
		return outFenced
	case errors.Is(err, ErrInvalidName), errors.Is(err, ErrInvalidRoot), errors.Is(err, backend.ErrInvalidKey):
		return outInvalidName
	case errors.Is(err, ErrConflict):
		return outConflict
	case errors.Is(err, ErrNotFound):
		return outNotFound
	case errors.Is(err, ErrPreconditionFailed):
		return outPrecondition
	case errors.Is(err, ErrUnsupported):
		return outUnsupported
	case errors.Is(err, ErrTooLarge):
		return outTooLarge
	case errors.Is(err, ErrUnreadable):
		return outUnreadable
	case errors.Is(err, backend.ErrPermission):
		return outPermission
	case errors.Is(err, context.Canceled):
		return outCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return outTimeout
	}
	return outError
}

// direction is the way bytes moved.
type direction int

const (
	dirRead direction = iota
	dirWrite
	numDirections
)

// durationBuckets are the histogram's bucket boundaries in seconds, from
// a local disk's milliseconds to a slow S3 endpoint's retries (the
// OpenTelemetry semantic conventions' HTTP duration buckets).
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// storeMetrics holds a store's instruments. A store without a
// MeterProvider has none (nil): its operations skip the hooks (see end),
// and moved returns at once.
type storeMetrics struct {
	duration metric.Float64Histogram
	io       metric.Int64Counter
	// The attribute sets, built once so that recording allocates none.
	durOpts [numOps][numOutcomes][]metric.RecordOption
	ioOpts  [numDirections][]metric.AddOption
}

// newStoreMetrics creates the instruments on mp; nil mp gives nil.
func newStoreMetrics(mp metric.MeterProvider) (*storeMetrics, error) {
	if mp == nil {
		return nil, nil
	}
	meter := mp.Meter(meterName)
	m := &storeMetrics{}
	var err error
	m.duration, err = meter.Float64Histogram(metricname.StoreOperationDuration,
		metric.WithUnit("s"),
		metric.WithDescription("Duration of the state store's operations, by operation and outcome."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	if err != nil {
		return nil, fmt.Errorf("metrics: %s: %w", metricname.StoreOperationDuration, err)
	}
	m.io, err = meter.Int64Counter(metricname.StoreIO,
		metric.WithUnit("By"),
		metric.WithDescription("Sealed bytes read from and written to the storage by the state store."))
	if err != nil {
		return nil, fmt.Errorf("metrics: %s: %w", metricname.StoreIO, err)
	}
	for o := range numOps {
		for r := range numOutcomes {
			set := attribute.NewSet(attribute.String(metricname.AttrOperation, opNames[o]), attribute.String(metricname.AttrOutcome, outcomeNames[r]))
			m.durOpts[o][r] = []metric.RecordOption{metric.WithAttributeSet(set)}
		}
	}
	for d, name := range [numDirections]string{"read", "write"} {
		m.ioOpts[d] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String(metricname.AttrIODirection, name)))}
	}
	return m, nil
}

// end records an operation of kind o that began at start and returned
// *err. Each operation defers it only when metrics are on:
//
//	if m := s.c.metrics; m != nil {
//		defer m.end(ctx, opGet, time.Now(), &err)
//	}
//
// so that a store without a MeterProvider reads no clock and pays one nil
// check.
func (m *storeMetrics) end(ctx context.Context, o op, start time.Time, err *error) {
	m.record(ctx, o, start, outcomeOf(*err))
}

// endList is end for List: an error returned by the caller's callback
// (*fnErr) stopped the listing, and the storage did what was asked, so it
// counts as ok.
func (m *storeMetrics) endList(ctx context.Context, start time.Time, err, fnErr *error) {
	r := outcomeOf(*err)
	if *fnErr != nil {
		r = outOK
	}
	m.record(ctx, opList, start, r)
}

func (m *storeMetrics) record(ctx context.Context, o op, start time.Time, r outcome) {
	m.duration.Record(ctx, time.Since(start).Seconds(), m.durOpts[o][r]...)
}

// timed runs f and, when metrics are on, records it as an operation of
// kind o.
func (m *storeMetrics) timed(ctx context.Context, o op, f func() error) error {
	if m == nil {
		return f()
	}
	start := time.Now()
	err := f()
	m.end(ctx, o, start, &err)
	return err
}

// moved counts n sealed bytes read or written.
func (m *storeMetrics) moved(ctx context.Context, d direction, n int) {
	if m != nil {
		m.io.Add(ctx, int64(n), m.ioOpts[d]...)
	}
}
