package main

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/internal/testserver"
	"github.com/cairnhq/state/testutil/versitygw"
)

// Black-box, through the CLI and a real server: a put whose data write is
// in flight when the process is stopped (SIGTERM: it releases the lock and
// exits), then an immediate second put of another value, then the first
// write delivered to the server: the second value survives (issue 23,
// findings 1 and 2). On versitygw the late write fails its condition; it
// replaced the second value on 0ac0f30.
func TestPut_StoppedWithWriteInFlight_NextValueSurvivesTheLateWrite(t *testing.T) {
	srv := versitygw.Start(t)
	proxy := testserver.NewLateProxy(t, srv.Endpoint, "/app/value")
	viaProxy := srv.S3Server
	viaProxy.Endpoint = proxy.URL
	tg := s3Target(t, "versitygw", &viaProxy)
	id, _ := tg.keygen(t, "id.txt")
	tg.cli(t, nil, "init", "--identity", id).must(t, exitOK) // only init creates a store (#24)
	tg.cli(t, []byte("v0"), "put", "app/value", "--identity", id).must(t, exitOK)

	proxy.Arm()
	first := exec.Command(binPath, "put", "app/value", "--identity", id)
	first.Env = tg.environ()
	first.Dir = tg.dir
	first.Stdin = strings.NewReader("first")
	p := testkit.StartProc(t, first)
	select {
	case <-proxy.Holding():
	case <-time.After(time.Minute):
		t.Fatalf("the first put's write never reached the proxy:\n%s", p.Stderr)
	}
	p.Signal(t, syscall.SIGTERM)
	code := p.Wait(t, time.Minute)
	t.Logf("first put, stopped with its write in flight: exit %d\n%s", code, p.Stderr)

	tg.cli(t, []byte("second"), "put", "app/value", "--identity", id).must(t, exitOK)
	status := proxy.Deliver(t)
	t.Logf("the first put's write, delivered late: HTTP %d", status)
	r := tg.cli(t, nil, "get", "app/value", "--identity", id).must(t, exitOK)
	if r.stdout != "second" {
		t.Fatalf("app/value = %q after the first put's write was delivered late (HTTP %d); want the second put's value", r.stdout, status)
	}
}
