package lock_test

import (
	"context"
	"fmt"
	"log/slog"

	"filippo.io/age"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// A lock given a MeterProvider reports whether it is held, its epoch and
// its heartbeat's age at each collection, and counts acquisitions and
// losses.
func ExampleOptions_meterProvider() {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	id, _ := age.GenerateX25519Identity()
	st, _ := store.Connect(ctx, mem.New(mem.Options{}), store.Keys{Identities: []age.Identity{id}}, store.ConnectOptions{Create: true})

	l, err := lock.Acquire(ctx, st, lock.Options{InstanceID: "pod-a", MeterProvider: mp, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Release(ctx)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		switch d := m.Data.(type) {
		case metricdata.Gauge[int64]:
			fmt.Printf("%s = %d\n", m.Name, d.DataPoints[0].Value)
		case metricdata.Sum[int64]:
			outcome, _ := d.DataPoints[0].Attributes.Value("cairn_state.outcome")
			fmt.Printf("%s{%s} = %d\n", m.Name, outcome.AsString(), d.DataPoints[0].Value)
		}
	}
	// Unordered output:
	// cairn_state.lock.held = 1
	// cairn_state.lock.suspended = 0
	// cairn_state.lock.epoch = 1
	// cairn_state.lock.acquisitions{acquired} = 1
}
