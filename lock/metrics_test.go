package lock_test

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/fault"
	"github.com/cairnhq/state/internal/lockadmin"
	"github.com/cairnhq/state/internal/metricname"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// Timings of the metrics tests, in virtual time (synctest).
const (
	mHeartbeat = time.Second
	mStale     = 5 * time.Second
)

// meterWorld is one metrics case: a mem backend (behind a fault wrapper),
// a store over it, and a manual reader collecting the lock's metrics.
type meterWorld struct {
	t      *testing.T
	f      *fault.Backend
	st     *store.Store
	reader *sdkmetric.ManualReader
	mp     metric.MeterProvider
}

func newMeterWorld(t *testing.T, b backend.Backend) *meterWorld {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	f := fault.New(b)
	return &meterWorld{t: t, f: f, st: testkit.Store(t, f, store.Options{}), reader: reader, mp: mp}
}

// opts are lock options for id; metered ones report to the world's
// provider.
func (w *meterWorld) opts(id string, metered bool) lock.Options {
	o := lock.Options{InstanceID: id, HeartbeatInterval: mHeartbeat, StaleAfter: mStale, Logger: slog.New(slog.DiscardHandler)}
	if metered {
		o.MeterProvider = w.mp
	}
	return o
}

func (w *meterWorld) acquire(st *store.Store, o lock.Options) *lock.Lock {
	w.t.Helper()
	l, err := lock.Acquire(w.t.Context(), st, o)
	if err != nil {
		w.t.Fatalf("Acquire(%s): %v", o.InstanceID, err)
	}
	w.t.Cleanup(func() { _ = l.Release(context.Background()) })
	return l
}

// snapshot is one collection: gauge values by instrument name, counter
// values by "instrument/attribute value".
type snapshot struct {
	gauges   map[string]float64
	counters map[string]int64
	units    map[string]string
}

func (w *meterWorld) collect() snapshot {
	w.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := w.reader.Collect(context.Background(), &rm); err != nil {
		w.t.Fatal(err)
	}
	s := snapshot{gauges: map[string]float64{}, counters: map[string]int64{}, units: map[string]string{}}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != "github.com/cairnhq/state/lock" {
			w.t.Errorf("scope %q, want the lock's import path", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			s.units[m.Name] = m.Unit
			switch d := m.Data.(type) {
			case metricdata.Gauge[int64]:
				for _, dp := range d.DataPoints {
					if dp.Attributes.Len() != 0 {
						w.t.Errorf("%s has attributes %v", m.Name, dp.Attributes.ToSlice())
					}
					s.gauges[m.Name] = float64(dp.Value)
				}
			case metricdata.Gauge[float64]:
				for _, dp := range d.DataPoints {
					s.gauges[m.Name] = dp.Value
				}
			case metricdata.Sum[int64]:
				if !d.IsMonotonic {
					w.t.Errorf("%s is not monotonic", m.Name)
				}
				for _, dp := range d.DataPoints {
					kvs := dp.Attributes.ToSlice()
					if len(kvs) != 1 {
						w.t.Fatalf("%s data point with attributes %v, want one", m.Name, kvs)
					}
					s.counters[m.Name+"/"+kvs[0].Value.AsString()] += dp.Value
				}
			default:
				w.t.Errorf("%s is a %T", m.Name, m.Data)
			}
		}
	}
	return s
}

// wantGauges checks held, suspended and epoch, and that the heartbeat age
// is age (within a microsecond: the clock is synctest's).
func (s snapshot) wantGauges(t *testing.T, when string, held, suspended bool, epoch uint64, age time.Duration) {
	t.Helper()
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	for name, want := range map[string]float64{metricname.LockHeld: b(held), metricname.LockSuspended: b(suspended), metricname.LockEpoch: float64(epoch)} {
		if got, ok := s.gauges[name]; !ok || got != want {
			t.Errorf("%s: %s = %v (reported %v), want %v", when, name, got, ok, want)
		}
	}
	if got, ok := s.gauges[metricname.LockHeartbeatAge]; !ok || math.Abs(got-age.Seconds()) > 1e-6 {
		t.Errorf("%s: %s = %v s (reported %v), want %v s", when, metricname.LockHeartbeatAge, got, ok, age.Seconds())
	}
}

// bothModes runs fn in a synctest bubble on a mem backend with
// compare-and-swap, and on one without (claims mode).
func bothModes(t *testing.T, fn func(t *testing.T, w *meterWorld)) {
	for _, c := range []struct {
		name string
		opts mem.Options
	}{{"CAS", mem.Options{}}, {"Claims", mem.Options{NoConditionalWrites: true}}} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { fn(t, newMeterWorld(t, mem.New(c.opts))) })
		})
	}
}

func TestMetrics_HeldEpochHeartbeatAge_FollowTheLockUntilRelease(t *testing.T) {
	bothModes(t, func(t *testing.T, w *meterWorld) {
		l := w.acquire(w.st, w.opts("pod-a", true))
		synctest.Wait()
		s := w.collect()
		s.wantGauges(t, "after acquiring", true, false, 1, 0)
		if got := s.counters[metricname.LockAcquisitions+"/acquired"]; got != 1 {
			t.Errorf("acquisitions acquired = %d, want 1 (%v)", got, s.counters)
		}
		for name, unit := range map[string]string{
			metricname.LockHeld: "1", metricname.LockSuspended: "1", metricname.LockEpoch: "{epoch}",
			metricname.LockHeartbeatAge: "s", metricname.LockAcquisitions: "{acquisition}",
		} {
			if s.units[name] != unit {
				t.Errorf("%s unit = %q, want %q", name, s.units[name], unit)
			}
		}

		time.Sleep(mHeartbeat / 2)
		w.collect().wantGauges(t, "half a heartbeat later", true, false, 1, mHeartbeat/2)
		// The heartbeat at one interval is confirmed: the age starts over.
		time.Sleep(mHeartbeat/2 + 200*time.Millisecond)
		synctest.Wait()
		w.collect().wantGauges(t, "after the first heartbeat", true, false, 1, 200*time.Millisecond)

		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		s = w.collect()
		for _, name := range []string{metricname.LockHeld, metricname.LockSuspended, metricname.LockEpoch, metricname.LockHeartbeatAge} {
			if v, ok := s.gauges[name]; ok {
				t.Errorf("after Release %s is still reported (%v)", name, v)
			}
		}
		// The next holder's epoch.
		w.acquire(w.st, w.opts("pod-b", true))
		s = w.collect()
		s.wantGauges(t, "the next holder", true, false, 2, 0)
		if got := s.counters[metricname.LockAcquisitions+"/acquired"]; got != 2 {
			t.Errorf("acquisitions acquired = %d, want 2", got)
		}
	})
}

func TestMetrics_Acquisitions_EachRefusalCountedByKind(t *testing.T) {
	bothModes(t, func(t *testing.T, w *meterWorld) {
		ctx := t.Context()
		w.acquire(w.st, w.opts("pod-a", false)) // the holder reports nothing here
		refuse := func(st *store.Store, o lock.Options, check func(*lock.HeldError) bool, what string) {
			t.Helper()
			_, err := lock.Acquire(ctx, st, o)
			var he *lock.HeldError
			if !errors.As(err, &he) || !check(he) {
				t.Fatalf("Acquire(%s) = %v, want a refusal: %s", o.InstanceID, err, what)
			}
		}
		refuse(w.st, w.opts("pod-b", true), func(he *lock.HeldError) bool { return !he.Duplicate && he.Unreadable == "" }, "held by pod-a")
		refuse(w.st, w.opts("pod-a", true), func(he *lock.HeldError) bool { return he.Duplicate }, "a duplicate of pod-a")
		// A fresh lock sealed to a key this process does not hold.
		other := w.otherRoot(t, "elsewhere")
		w.acquire(other.foreignKey, w.opts("pod-x", false))
		refuse(other.ours, w.opts("pod-b", true), func(he *lock.HeldError) bool { return he.Unreadable != "" }, "unreadable")
		// Errors: bad options, and storage that does not answer.
		if _, err := lock.Acquire(ctx, w.st, lock.Options{InstanceID: "pod-c", HeartbeatInterval: -1, MeterProvider: w.mp}); err == nil {
			t.Fatal("Acquire with a negative heartbeat succeeded")
		}
		w.f.SetUnavailable(true)
		if _, err := lock.Acquire(ctx, w.st, w.opts("pod-c", true)); !errors.Is(err, fault.ErrInjected) {
			t.Fatalf("Acquire on unavailable storage = %v", err)
		}
		w.f.SetUnavailable(false)

		got := w.collect().counters
		want := map[string]int64{
			metricname.LockAcquisitions + "/refused_held":       1,
			metricname.LockAcquisitions + "/refused_duplicate":  1,
			metricname.LockAcquisitions + "/refused_unreadable": 1,
			metricname.LockAcquisitions + "/error":              2,
		}
		for k, n := range want {
			if got[k] != n {
				t.Errorf("%s = %d, want %d", k, got[k], n)
			}
		}
		if n := got[metricname.LockAcquisitions+"/acquired"]; n != 0 {
			t.Errorf("acquired = %d, want 0 (only unmetered acquisitions succeeded)", n)
		}
	})
}

// twoKeys is the same root of a backend seen with our key and another.
type twoKeys struct{ ours, foreignKey *store.Store }

func (w *meterWorld) otherRoot(t *testing.T, root string) twoKeys {
	t.Helper()
	open := func() *store.Store {
		env := testkit.Envelope(t)
		st, err := storeadmin.Open(w.f, env, store.Options{Root: root})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	return twoKeys{ours: open(), foreignKey: open()}
}

func TestMetrics_Suspended_ThenReopened(t *testing.T) {
	bothModes(t, func(t *testing.T, w *meterWorld) {
		l := w.acquire(w.st, w.opts("pod-a", true))
		w.f.SetUnavailable(true)
		// Past the lease (1.25 heartbeats) without a confirmed heartbeat.
		time.Sleep(mHeartbeat + mHeartbeat/2)
		synctest.Wait()
		if !errors.Is(l.Err(), lock.ErrSuspended) {
			t.Fatalf("Err during the outage = %v, want ErrSuspended", l.Err())
		}
		w.collect().wantGauges(t, "during the outage", true, true, 1, mHeartbeat+mHeartbeat/2)

		w.f.SetUnavailable(false)
		// The heartbeat retries every interval/8 and confirms.
		time.Sleep(mHeartbeat / 4)
		synctest.Wait()
		if err := l.Err(); err != nil {
			t.Fatalf("Err after the outage = %v", err)
		}
		s := w.collect()
		if s.gauges[metricname.LockSuspended] != 0 || s.gauges[metricname.LockHeld] != 1 {
			t.Errorf("after the outage: held %v suspended %v, want 1 and 0", s.gauges[metricname.LockHeld], s.gauges[metricname.LockSuspended])
		}
		if age := s.gauges[metricname.LockHeartbeatAge]; age >= mHeartbeat.Seconds()/4 {
			t.Errorf("heartbeat age after a confirmed heartbeat = %v s, want under %v", age, mHeartbeat.Seconds()/4)
		}
		for k, n := range s.counters {
			if strings.HasPrefix(k, metricname.LockLosses) {
				t.Errorf("%s = %d after an outage shorter than the stale window", k, n)
			}
		}
	})
}

// loss waits for l to be lost and returns the collection then.
func (w *meterWorld) loss(l *lock.Lock, within time.Duration) snapshot {
	w.t.Helper()
	select {
	case <-l.Lost():
	case <-time.After(within):
		w.t.Fatalf("not lost within %s: %v", within, l.Err())
	}
	synctest.Wait()
	return w.collect()
}

func (s snapshot) wantLosses(t *testing.T, reason string) {
	t.Helper()
	for _, r := range []string{"taken_over", "broken", "lease_expired"} {
		want := int64(0)
		if r == reason {
			want = 1
		}
		if got := s.counters[metricname.LockLosses+"/"+r]; got != want {
			t.Errorf("losses %s = %d, want %d (%v)", r, got, want, s.counters)
		}
	}
	if s.units[metricname.LockLosses] != "{loss}" {
		t.Errorf("%s unit = %q", metricname.LockLosses, s.units[metricname.LockLosses])
	}
	if s.gauges[metricname.LockHeld] != 0 || s.gauges[metricname.LockSuspended] != 0 {
		t.Errorf("after the loss: held %v suspended %v, want 0 and 0", s.gauges[metricname.LockHeld], s.gauges[metricname.LockSuspended])
	}
}

func TestMetrics_Loss_TakenOver(t *testing.T) {
	bothModes(t, func(t *testing.T, w *meterWorld) {
		a := w.acquire(w.st, w.opts("pod-a", true))
		if _, err := lockadmin.Break(t.Context(), w.st, lockadmin.BreakOptions{Holder: "pod-a", Force: true, StaleAfter: mStale}); err != nil {
			t.Fatal(err)
		}
		w.acquire(w.st, w.opts("pod-b", false))
		s := w.loss(a, 2*mHeartbeat)
		s.wantLosses(t, "taken_over")
		if s.gauges[metricname.LockEpoch] != 1 {
			t.Errorf("epoch after the loss = %v, want ours (1)", s.gauges[metricname.LockEpoch])
		}
	})
}

func TestMetrics_Loss_Broken(t *testing.T) {
	bothModes(t, func(t *testing.T, w *meterWorld) {
		a := w.acquire(w.st, w.opts("pod-a", true))
		if _, err := lockadmin.Break(t.Context(), w.st, lockadmin.BreakOptions{Holder: "pod-a", Force: true, StaleAfter: mStale}); err != nil {
			t.Fatal(err)
		}
		w.loss(a, 2*mHeartbeat).wantLosses(t, "broken")
	})
}

func TestMetrics_Loss_LeaseExpired(t *testing.T) {
	bothModes(t, func(t *testing.T, w *meterWorld) {
		a := w.acquire(w.st, w.opts("pod-a", true))
		w.f.SetUnavailable(true)
		s := w.loss(a, mStale)
		s.wantLosses(t, "lease_expired")
		// The age keeps counting from the last confirmed write.
		if age := s.gauges[metricname.LockHeartbeatAge]; age < (mStale - 1500*time.Millisecond).Seconds() {
			t.Errorf("heartbeat age at the loss = %v s, want the stale window less its margin", age)
		}
	})
}

// refusingProvider is a MeterProvider whose meter refuses counters.
type refusingProvider struct{ noop.MeterProvider }

func (refusingProvider) Meter(string, ...metric.MeterOption) metric.Meter { return refusingMeter{} }

type refusingMeter struct{ noop.Meter }

func (refusingMeter) Int64Counter(string, ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return nil, errors.New("instrument refused")
}

func TestMetrics_ProviderRefusingInstruments_AcquireFailsAndWritesNothing(t *testing.T) {
	b := mem.New(mem.Options{})
	f := fault.New(b)
	st := testkit.Store(t, f, store.Options{})
	_, err := lock.Acquire(t.Context(), st, lock.Options{InstanceID: "pod-a", MeterProvider: refusingProvider{}})
	if err == nil || !strings.Contains(err.Error(), metricname.LockAcquisitions) || !strings.Contains(err.Error(), "instrument refused") {
		t.Fatalf("Acquire with a provider refusing the counters = %v, want an error naming them", err)
	}
	if c := f.Counts(); c.Total() != 0 {
		t.Fatalf("the refused Acquire sent requests: %s", c)
	}
}

// Collections run on the exporter's goroutine while the heartbeat runs on
// the lock's; the race detector watches them overlap.
func TestMetrics_CollectDuringHeartbeatsAndLoss(t *testing.T) {
	bothModes(t, func(t *testing.T, w *meterWorld) {
		a := w.acquire(w.st, w.opts("pod-a", true))
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 400 {
				var rm metricdata.ResourceMetrics
				_ = w.reader.Collect(context.Background(), &rm)
				time.Sleep(mHeartbeat / 40)
			}
		}()
		time.Sleep(3*mHeartbeat + mHeartbeat/2) // between two heartbeats
		if _, err := lockadmin.Break(t.Context(), w.st, lockadmin.BreakOptions{Holder: "pod-a", Force: true, StaleAfter: mStale}); err != nil {
			t.Fatal(err)
		}
		<-done
		w.loss(a, time.Millisecond).wantLosses(t, "broken")
	})
}
