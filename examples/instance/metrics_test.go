package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scrape is one Prometheus text exposition, as value by series:
// `name{label="v",…}` with the labels as the exporter wrote them, minus
// the otel_scope_* labels every series carries.
type scrape struct {
	body   string
	series map[string]float64
}

var scopeLabels = regexp.MustCompile(`,?otel_scope_[a-z_]+="[^"]*"`)

func scrapeMetrics(t *testing.T, url string) scrape {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("scraping %s: %s, Content-Type %q", url, resp.Status, resp.Header.Get("Content-Type"))
	}
	s := scrape{body: string(body), series: map[string]float64{}}
	for _, line := range strings.Split(s.body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("unparsable line %q", line)
		}
		key := strings.Replace(scopeLabels.ReplaceAllString(line[:i], ""), "{,", "{", 1)
		s.series[strings.TrimSuffix(key, "{}")] = v
	}
	return s
}

func (s scrape) value(t *testing.T, series string) float64 {
	t.Helper()
	v, ok := s.series[series]
	if !ok {
		t.Fatalf("no series %s in the scrape:\n%s", series, s.body)
	}
	return v
}

var metricsLine = regexp.MustCompile(`instance: serving metrics on (http://\S+/metrics)`)

// The example serves the store's and the lock's metrics when asked: the
// real process, scraped over HTTP in Prometheus's text format.
func TestExample_MetricsAddr_ServesLockAndStoreMetrics(t *testing.T) {
	w := newWorld(t, fsTarget())
	const heartbeat = time.Second
	a := w.start(t, "", "inst-a", nil, "--metrics-addr", "127.0.0.1:0", "--heartbeat", heartbeat.String(), "--stale-after", "5s")
	epoch, _ := ready(t, a, "inst-a")
	m := metricsLine.FindStringSubmatch(a.Stderr.String())
	if m == nil {
		t.Fatalf("no metrics address on stderr:\n%s", a.Stderr.String())
	}
	url := m[1]

	s := scrapeMetrics(t, url)
	if v := s.value(t, "cairn_state_lock_held_ratio"); v != 1 {
		t.Errorf("held = %v, want 1", v)
	}
	if v := s.value(t, "cairn_state_lock_suspended_ratio"); v != 0 {
		t.Errorf("suspended = %v, want 0", v)
	}
	if v := s.value(t, "cairn_state_lock_epoch"); v != float64(epoch) {
		t.Errorf("epoch = %v, want %d as on the ready line", v, epoch)
	}
	if v := s.value(t, "cairn_state_lock_heartbeat_age_seconds"); v < 0 || v >= 1.25*heartbeat.Seconds() {
		t.Errorf("heartbeat age = %v s, want under the lease (%v s)", v, 1.25*heartbeat.Seconds())
	}
	if v := s.value(t, `cairn_state_lock_acquisitions_total{cairn_state_outcome="acquired"}`); v != 1 {
		t.Errorf("acquisitions = %v, want 1", v)
	}
	// The boot: migrations and the boot counter are updates; the lock's
	// record and marker are puts.
	if v := s.value(t, `cairn_state_store_operation_duration_seconds_count{cairn_state_operation="update",cairn_state_outcome="ok"}`); v < 1 {
		t.Errorf("updates = %v, want the boot counter's at least", v)
	}
	puts := s.value(t, `cairn_state_store_operation_duration_seconds_count{cairn_state_operation="put",cairn_state_outcome="ok"}`)
	for _, dir := range []string{"read", "write"} {
		if v := s.value(t, `cairn_state_store_io_bytes_total{cairn_state_io_direction="`+dir+`"}`); v <= 0 {
			t.Errorf("bytes %s = %v, want some", dir, v)
		}
	}
	for _, name := range []string{"boots", "settings/", "legacy/", ".lock"} {
		if strings.Contains(s.body, name) {
			t.Errorf("the scrape names the state object %q:\n%s", name, s.body)
		}
	}
	if !strings.Contains(s.body, "# TYPE cairn_state_store_operation_duration_seconds histogram") {
		t.Errorf("the duration is not exposed as a histogram:\n%s", s.body)
	}

	// Heartbeats (compare-and-swap puts on fs) move the store's counters,
	// and the age starts over at each.
	deadline := time.Now().Add(bootTimeout)
	for {
		s = scrapeMetrics(t, url)
		if s.value(t, `cairn_state_store_operation_duration_seconds_count{cairn_state_operation="put",cairn_state_outcome="ok"}`) >= puts+2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no heartbeat put within %s:\n%s", bootTimeout, s.body)
		}
		time.Sleep(heartbeat / 4)
	}
	if v := s.value(t, "cairn_state_lock_heartbeat_age_seconds"); v >= 1.25*heartbeat.Seconds() {
		t.Errorf("heartbeat age after two heartbeats = %v s", v)
	}
	shutdown(t, a)
}

func TestExample_MetricsAddrUnusable_ExitsOneTouchingNothing(t *testing.T) {
	w := newWorld(t, fsTarget())
	a := w.start(t, "", "inst-a", nil, "--metrics-addr", "256.0.0.1:99999")
	if code := a.Wait(t, exitTimeout); code != 1 {
		t.Fatalf("exit code = %d, want 1\nstderr:\n%s", code, a.Stderr.String())
	}
	if !strings.Contains(a.Stderr.String(), "instance: metrics: listen tcp: ") {
		t.Errorf("stderr does not say the metrics address is unusable:\n%s", a.Stderr.String())
	}
	if _, ok := w.get(t, "boots"); ok {
		t.Error("the instance booted although it could not serve its metrics")
	}
}
