package state_test

import (
	"context"
	"testing"

	"filippo.io/age"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	state "github.com/cairnhq/state"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/metricname"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/store"
)

// Config.MeterProvider reaches both the store and the lock.
func TestOpen_MeterProvider_StoreAndLockReport(t *testing.T) {
	ctx := context.Background()
	_, id := testkit.IdentityFile(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(ctx) })
	inst := openT(t, state.Config{
		Backend: mem.New(mem.Options{}), Identities: []age.Identity{id},
		InstanceID: "pod-a", MeterProvider: mp,
	})
	if _, err := inst.Store().Put(ctx, "app", []byte("v"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}

	collect := func() map[string]int64 {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				switch d := m.Data.(type) {
				case metricdata.Gauge[int64]:
					for _, dp := range d.DataPoints {
						out[m.Name] = dp.Value
					}
				case metricdata.Sum[int64]:
					for _, dp := range d.DataPoints {
						if v, ok := dp.Attributes.Value(metricname.AttrOutcome); ok {
							out[m.Name+"/"+v.AsString()] += dp.Value
						} else {
							out[m.Name] += dp.Value
						}
					}
				case metricdata.Histogram[float64]:
					for _, dp := range d.DataPoints {
						op, _ := dp.Attributes.Value(metricname.AttrOperation)
						res, _ := dp.Attributes.Value(metricname.AttrOutcome)
						out[m.Name+"/"+op.AsString()+"/"+res.AsString()] += int64(dp.Count)
					}
				}
			}
		}
		return out
	}
	got := collect()
	if got[metricname.LockHeld] != 1 || got[metricname.LockEpoch] != 1 || got[metricname.LockAcquisitions+"/acquired"] != 1 {
		t.Errorf("lock metrics = %v, want held 1, epoch 1, one acquisition", got)
	}
	// The application's put, and the lock's own writes through the store.
	if n := got[metricname.StoreOperationDuration+"/put/ok"]; n < 2 {
		t.Errorf("store puts = %d, want the application's and the lock's (%v)", n, got)
	}
	if got[metricname.StoreIO] <= 0 {
		t.Errorf("store io = %d, want the sealed bytes written", got[metricname.StoreIO])
	}
	if err := inst.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := collect()[metricname.LockHeld]; ok {
		t.Error("the lock's gauges are still reported after Close")
	}
}
