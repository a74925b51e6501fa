package store_test

import (
	"context"
	"fmt"
	"log"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/store"
)

// A store given a MeterProvider reports its operations. An application
// passes the provider its exporter feeds (Prometheus, OTLP); here a manual
// reader shows what was recorded.
func ExampleOptions_meterProvider() {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)

	st := exampleStore(mem.New(mem.Options{}), store.Options{MeterProvider: mp})
	_, _ = st.Put(ctx, "settings", []byte(`{"theme":"dark"}`), store.PutOptions{})
	_, _, _ = st.Get(ctx, "settings")
	_, _, _ = st.Get(ctx, "missing")

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		log.Fatal(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if h, ok := m.Data.(metricdata.Histogram[float64]); ok {
			fmt.Printf("%s (%s):\n", m.Name, m.Unit)
			for _, dp := range h.DataPoints {
				op, _ := dp.Attributes.Value("cairn_state.operation")
				outcome, _ := dp.Attributes.Value("cairn_state.outcome")
				fmt.Printf("  %s %s: %d\n", op.AsString(), outcome.AsString(), dp.Count)
			}
		}
	}
	// Unordered output:
	// cairn_state.store.operation.duration (s):
	//   put ok: 2
	//   get ok: 1
	//   get not_found: 1
}
