package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// metricsServer serves the store's and the lock's metrics in Prometheus's
// text format at /metrics (docs/adr/0024): OpenTelemetry's SDK, read by its
// Prometheus exporter into a registry of our own (not the process-wide
// default one, so nothing else sneaks in).
type metricsServer struct {
	provider *sdkmetric.MeterProvider
	srv      *http.Server
	done     chan struct{}
}

// serveMetrics listens on addr and serves until stop. It says where on
// stderr, so that a port chosen by the system (":0") can be found.
func serveMetrics(addr string, stderr io.Writer) (*metricsServer, error) {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	m := &metricsServer{
		provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter)),
		srv:      &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		done:     make(chan struct{}),
	}
	go func() {
		defer close(m.done)
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(stderr, "instance: metrics: %v\n", err)
		}
	}()
	fmt.Fprintf(stderr, "instance: serving metrics on http://%s/metrics\n", ln.Addr())
	return m, nil
}

// stop ends the server and the provider.
func (m *metricsServer) stop() {
	if m == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = m.srv.Shutdown(ctx)
	<-m.done
	_ = m.provider.Shutdown(ctx)
}
