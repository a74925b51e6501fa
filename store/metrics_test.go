package store_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/fault"
	"github.com/cairnhq/state/internal/metricname"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/store"
)

// metered is a store over a fault-wrapped mem backend whose metrics go to
// a manual reader.
type metered struct {
	st     *store.Store
	f      *fault.Backend
	reader *sdkmetric.ManualReader
}

func newMetered(t testing.TB, opts store.Options) *metered {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	f := fault.New(mem.New(mem.Options{}))
	opts.MeterProvider = mp
	st := testkit.Store(t, f, opts)
	return &metered{st: st, f: f, reader: reader}
}

func (m *metered) collect(t testing.TB) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := m.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

func findMetric(t testing.TB, rm metricdata.ResourceMetrics, name string) (metricdata.Metrics, bool) {
	t.Helper()
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

func attrsKey(set attribute.Set) string {
	var parts []string
	for _, kv := range set.ToSlice() {
		parts = append(parts, string(kv.Key)+"="+kv.Value.String())
	}
	return strings.Join(parts, ",")
}

// opCounts is the duration histogram's count per "operation/outcome".
func opCounts(t testing.TB, rm metricdata.ResourceMetrics) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	m, ok := findMetric(t, rm, metricname.StoreOperationDuration)
	if !ok {
		return out
	}
	h, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s is a %T, want a float64 histogram", m.Name, m.Data)
	}
	for _, dp := range h.DataPoints {
		op, _ := dp.Attributes.Value(metricname.AttrOperation)
		res, _ := dp.Attributes.Value(metricname.AttrOutcome)
		out[op.AsString()+"/"+res.AsString()] += dp.Count
	}
	return out
}

// ioBytes is the io counter per direction.
func ioBytes(t testing.TB, rm metricdata.ResourceMetrics) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	m, ok := findMetric(t, rm, metricname.StoreIO)
	if !ok {
		return out
	}
	s, ok := m.Data.(metricdata.Sum[int64])
	if !ok || !s.IsMonotonic {
		t.Fatalf("%s is a %T (monotonic %v), want a monotonic int64 sum", m.Name, m.Data, ok && s.IsMonotonic)
	}
	for _, dp := range s.DataPoints {
		d, _ := dp.Attributes.Value(metricname.AttrIODirection)
		out[d.AsString()] += dp.Value
	}
	return out
}

func TestMetrics_OperationsCountedByKindAndOutcome(t *testing.T) {
	ctx := t.Context()
	m := newMetered(t, store.Options{MaxObjectSize: 4096})
	st := m.st
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	info, err := st.Put(ctx, "a", []byte("one"), store.PutOptions{})
	must(err)
	_, _, err = st.Get(ctx, "a")
	must(err)
	_, _, err = st.Get(ctx, "missing")
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get missing = %v", err)
	}
	_, err = st.Put(ctx, "a", []byte("two"), store.PutOptions{IfVersion: "not-" + info.Version})
	if !errors.Is(err, store.ErrPreconditionFailed) {
		t.Fatalf("Put with a wrong version = %v", err)
	}
	_, err = st.Put(ctx, "a", []byte("two"), store.PutOptions{IfAbsent: true})
	if !errors.Is(err, store.ErrPreconditionFailed) {
		t.Fatalf("Put if absent over an object = %v", err)
	}
	_, err = st.Update(ctx, "a", func(old []byte, _ bool) ([]byte, error) { return append(old, '!'), nil })
	must(err)
	_, err = st.Stat(ctx, "a")
	must(err)
	_, err = st.Stat(ctx, "missing")
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Stat missing = %v", err)
	}
	must(st.List(ctx, "", func(store.Info) error { return nil }))
	// A listing the caller stops is what it asked for: ok, not an error.
	errStop := errors.New("enough")
	if err := st.List(ctx, "", func(store.Info) error { return errStop }); !errors.Is(err, errStop) {
		t.Fatalf("List stopped by its callback = %v", err)
	}
	_, _, err = st.Get(ctx, "../escape")
	if !errors.Is(err, store.ErrInvalidName) {
		t.Fatalf("Get of an invalid name = %v", err)
	}
	_, err = st.Put(ctx, "big", make([]byte, 8192), store.PutOptions{})
	if !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("Put over the limit = %v", err)
	}
	fence := &switchFence{}
	fence.trip(errors.New("lock lost"))
	if err := storeadmin.WithFence(st, fence).Delete(ctx, "a", store.DeleteOptions{}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("fenced Delete = %v", err)
	}
	// An object sealed by another store's key does not open.
	other, err := storeadmin.Open(m.f, testkit.Envelope(t), store.Options{})
	must(err)
	_, err = other.Put(ctx, "foreign", []byte("x"), store.PutOptions{})
	must(err)
	_, _, err = st.Get(ctx, "foreign")
	if !errors.Is(err, store.ErrUnreadable) {
		t.Fatalf("Get of a foreign object = %v", err)
	}
	m.f.SetUnavailable(true)
	if _, err := st.Put(ctx, "a", []byte("x"), store.PutOptions{}); !errors.Is(err, fault.ErrInjected) {
		t.Fatalf("Put on unavailable storage = %v", err)
	}
	if err := st.List(ctx, "", func(store.Info) error { return nil }); !errors.Is(err, fault.ErrInjected) {
		t.Fatalf("List on unavailable storage = %v", err)
	}
	m.f.SetUnavailable(false)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := st.Get(cancelled, "a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get with a cancelled context = %v", err)
	}
	must(st.Delete(ctx, "a", store.DeleteOptions{}))
	if err := st.Delete(ctx, "a", store.DeleteOptions{}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second Delete = %v", err)
	}

	got := opCounts(t, m.collect(t))
	want := map[string]uint64{
		"put/ok":                  1,
		"get/ok":                  1,
		"get/not_found":           1,
		"put/precondition_failed": 2,
		"update/ok":               1,
		"stat/ok":                 1,
		"stat/not_found":          1,
		"list/ok":                 2,
		"get/invalid_name":        1,
		"put/too_large":           1,
		"delete/fenced":           1,
		"get/unreadable":          1,
		"put/error":               1,
		"list/error":              1,
		"get/canceled":            1,
		"delete/ok":               1,
		"delete/not_found":        1,
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("operations %s = %d, want %d", k, got[k], n)
		}
	}
	for k, n := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected operations %s = %d (the other store has no MeterProvider; Update's own get and put count as the update)", k, n)
		}
	}
}

func TestMetrics_UpdateConflictCounted(t *testing.T) {
	m := newMetered(t, store.Options{UpdateAttempts: 2})
	ctx := t.Context()
	if _, err := m.st.Put(ctx, "n", []byte("0"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	// Another writer changes the object between every read and write.
	_, err := m.st.Update(ctx, "n", func(old []byte, _ bool) ([]byte, error) {
		if _, err := m.st.Put(ctx, "n", []byte("other"), store.PutOptions{}); err != nil {
			return nil, err
		}
		return []byte("mine"), nil
	})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Update = %v, want ErrConflict", err)
	}
	got := opCounts(t, m.collect(t))
	if got["update/conflict"] != 1 || got["update/precondition_failed"] != 0 {
		t.Errorf("update outcomes = %v, want one conflict", got)
	}
}

func TestMetrics_SealedBytesReadAndWritten(t *testing.T) {
	m := newMetered(t, store.Options{})
	ctx := t.Context()
	value := make([]byte, 1000)
	a, err := m.st.Put(ctx, "a", value, store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Size <= int64(len(value)) {
		t.Fatalf("sealed size %d not above the plaintext's %d", a.Size, len(value))
	}
	rm := m.collect(t)
	if got := ioBytes(t, rm); got["write"] != a.Size || got["read"] != 0 {
		t.Fatalf("after one put: io = %v, want write=%d read=0", got, a.Size)
	}
	if _, _, err := m.st.Get(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	b, err := m.st.Update(ctx, "a", func(old []byte, _ bool) ([]byte, error) { return old[:10], nil })
	if err != nil {
		t.Fatal(err)
	}
	// A failed write moves nothing; a failed read of an object that was
	// fetched counts what was fetched.
	m.f.SetUnavailable(true)
	_, _ = m.st.Put(ctx, "a", value, store.PutOptions{})
	m.f.SetUnavailable(false)

	got := ioBytes(t, m.collect(t))
	if want := a.Size + b.Size; got["write"] != want {
		t.Errorf("bytes written = %d, want %d (put %d + update %d)", got["write"], want, a.Size, b.Size)
	}
	if want := 2 * a.Size; got["read"] != want {
		t.Errorf("bytes read = %d, want %d (get + update's read of %d)", got["read"], want, a.Size)
	}
	mt, _ := findMetric(t, rm, metricname.StoreIO)
	if mt.Unit != "By" {
		t.Errorf("%s unit = %q, want By", mt.Name, mt.Unit)
	}
}

func TestMetrics_LatencyInSeconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMetered(t, store.Options{})
		ctx := t.Context()
		// Every request takes 1.5 s of (virtual) time.
		m.f.SetHook(func(ctx context.Context, c fault.Call) error {
			time.Sleep(1500 * time.Millisecond)
			return nil
		})
		if _, err := m.st.Put(ctx, "a", []byte("x"), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := m.st.Get(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		rm := m.collect(t)
		mt, ok := findMetric(t, rm, metricname.StoreOperationDuration)
		if !ok {
			t.Fatal("no duration histogram")
		}
		if mt.Unit != "s" {
			t.Errorf("unit = %q, want s", mt.Unit)
		}
		h := mt.Data.(metricdata.Histogram[float64])
		if len(h.DataPoints) != 2 {
			t.Fatalf("data points = %d, want put/ok and get/ok", len(h.DataPoints))
		}
		for _, dp := range h.DataPoints {
			if dp.Count != 1 || math.Abs(dp.Sum-1.5) > 1e-9 {
				t.Errorf("%s: count %d sum %v s, want one operation of 1.5 s", attrsKey(dp.Attributes), dp.Count, dp.Sum)
			}
			// 1.5 s falls in the (1, 2.5] bucket of the second-scale
			// boundaries.
			i := slices.Index(dp.Bounds, 2.5)
			if i < 0 || dp.BucketCounts[i] != 1 {
				t.Errorf("%s: bounds %v counts %v, want 1.5 s in the bucket up to 2.5", attrsKey(dp.Attributes), dp.Bounds, dp.BucketCounts)
			}
		}
	})
}

func TestMetrics_AttributesBoundedNeverNames(t *testing.T) {
	m := newMetered(t, store.Options{})
	ctx := t.Context()
	const secret = "tokens/s3cr3t-hunter2"
	if _, err := m.st.Put(ctx, secret, []byte("value-hunter2"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	_, _, _ = m.st.Get(ctx, secret)
	_, _, _ = m.st.Get(ctx, secret+"-missing")
	_ = m.st.Delete(ctx, secret, store.DeleteOptions{})
	rm := m.collect(t)
	if dump := fmt.Sprintf("%+v", rm); strings.Contains(dump, "hunter2") {
		t.Errorf("collected metrics mention the object's name or value:\n%s", dump)
	}
	allowed := map[attribute.Key]bool{metricname.AttrOperation: true, metricname.AttrOutcome: true, metricname.AttrIODirection: true}
	n := 0
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != "github.com/cairnhq/state/store" {
			t.Errorf("scope %q, want the store's import path", sm.Scope.Name)
		}
		for _, mt := range sm.Metrics {
			var sets []attribute.Set
			switch d := mt.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					sets = append(sets, dp.Attributes)
				}
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					sets = append(sets, dp.Attributes)
				}
			}
			for _, s := range sets {
				n++
				for _, kv := range s.ToSlice() {
					if !allowed[kv.Key] {
						t.Errorf("%s has attribute %s", mt.Name, kv.Key)
					}
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no data points collected")
	}
}

// refusingProvider is a MeterProvider whose meter refuses histograms.
type refusingProvider struct{ noop.MeterProvider }

func (refusingProvider) Meter(string, ...metric.MeterOption) metric.Meter { return refusingMeter{} }

type refusingMeter struct{ noop.Meter }

func (refusingMeter) Float64Histogram(string, ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	return nil, errors.New("instrument refused")
}

func TestMetrics_ProviderRefusingInstruments_OpenFailsNamingIt(t *testing.T) {
	_, err := storeadmin.Open(mem.New(mem.Options{}), testkit.Envelope(t), store.Options{MeterProvider: refusingProvider{}})
	if err == nil || !strings.Contains(err.Error(), metricname.StoreOperationDuration) || !strings.Contains(err.Error(), "instrument refused") {
		t.Fatalf("Open with a provider that refuses the histogram = %v, want an error naming it", err)
	}
}

// flagBenchMetrics makes BenchmarkMem record to an SDK MeterProvider (with
// a manual reader, as an application's Prometheus exporter would use), to
// compare its cost with none in the same run:
//
//	go test -run x -bench Mem -count 10 ./store > none.txt
//	go test -run x -bench Mem -count 10 ./store -args -store.bench-metrics > sdk.txt
//	benchstat none.txt sdk.txt
var flagBenchMetrics = flag.Bool("store.bench-metrics", false, "BenchmarkMem records metrics to an SDK MeterProvider")

// benchProvider is the MeterProvider of BenchmarkMem: nil unless
// -store.bench-metrics is given.
func benchProvider(b *testing.B) metric.MeterProvider {
	if !*flagBenchMetrics {
		return nil
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return mp
}

// Keeps and prunes of history are counted as operations of their own,
// history_keep and history_prune, beside the write that made them.
func TestMetrics_HistoryKeepsAndPrunesCounted(t *testing.T) {
	for _, history := range []int{2, store.NoHistory} {
		t.Run(fmt.Sprintf("history=%d", history), func(t *testing.T) {
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
			st, err := store.Connect(t.Context(), mem.New(mem.Options{}), keysOf(testkit.Identity(t)),
				store.ConnectOptions{Create: true, Options: store.Options{History: history, MeterProvider: mp}})
			if err != nil {
				t.Fatal(err)
			}
			v := storeadmin.WithFence(st, &holderFence{switchFence: switchFence{epoch: 1}, instance: "pod-a"})
			counts := func() map[string]uint64 {
				var rm metricdata.ResourceMetrics
				if err := reader.Collect(t.Context(), &rm); err != nil {
					t.Fatal(err)
				}
				return opCounts(t, rm)
			}
			before := counts() // the store's creation
			for i := range 4 {
				mustPut(t, v, "a", fmt.Sprint(i))
			}
			settle(t, v)
			got := counts()
			for k, n := range before {
				got[k] -= n
			}
			// Four writes keep four versions; a retention of 2 prunes the
			// oldest at the third and the fourth.
			want := map[string]uint64{"history_keep/ok": 4, "history_prune/ok": 2}
			if history == store.NoHistory {
				want = map[string]uint64{}
			}
			for _, k := range []string{"history_keep/ok", "history_prune/ok"} {
				if got[k] != want[k] {
					t.Errorf("%s = %d, want %d (all: %v)", k, got[k], want[k], got)
				}
			}
			if got["put/ok"] != 4 {
				t.Errorf("put/ok = %d, want 4: a keep is not counted as a put", got["put/ok"])
			}
		})
	}
}
