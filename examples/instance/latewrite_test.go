package main

import (
	"strconv"
	"testing"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/testserver"
	"github.com/cairnhq/state/testutil/versitygw"
)

// Black-box, through the example app and a real server (issue 23, findings
// 1 and 2): the instance is stopped (SIGTERM) while its boot write is in
// flight — a proxy holds the PUT — and releases the lock; a second instance
// boots at once, and a third after it; only then does the first instance's
// write reach the server. The later instances' value survives: the late
// write fails its condition on versitygw.
func TestExample_StoppedWithWriteInFlight_NextInstancesValueSurvives(t *testing.T) {
	srv := versitygw.Start(t)
	proxy := testserver.NewLateProxy(t, srv.Endpoint, "/boots")
	viaProxy := srv.S3Server
	viaProxy.Endpoint = proxy.URL
	tg := target{name: "versitygw", env: srv.Env(), srv: &viaProxy, fresh: func(t *testing.T) (string, backend.Backend, string) {
		bucket := srv.NewBucket(t)
		return viaProxy.URL(bucket, "apps/demo"), srv.Backend(t, bucket), "apps/demo"
	}}
	w := newWorld(t, tg)

	proxy.Arm()
	a := w.start(t, "", "inst-a", nil)
	select {
	case <-proxy.Holding():
	case <-time.After(bootTimeout):
		t.Fatalf("the first instance's boot write never reached the proxy\nstderr:\n%s", a.Stderr.String())
	}
	shutdown(t, a) // 143 and "shutdown complete": released with the write cancelled

	// The boot write was cancelled by the shutdown, or sent again and
	// landed before the release: either way the next instances boot at once.
	b := w.start(t, "", "inst-b", nil)
	_, bBoots := ready(t, b, "inst-b")
	shutdown(t, b)
	c := w.start(t, "", "inst-c", nil)
	if _, boots := ready(t, c, "inst-c"); boots != bBoots+1 {
		t.Fatalf("third instance: boots = %d, want %d", boots, bBoots+1)
	}
	shutdown(t, c)

	want := strconv.Itoa(bBoots + 1)
	status := proxy.Deliver(t)
	t.Logf("the first instance's boot write, delivered late: HTTP %d", status)
	if v, _ := w.get(t, "boots"); v != want {
		t.Fatalf("boots = %q after the first instance's write was delivered late (HTTP %d); want the third instance's %s", v, status, want)
	}
}
