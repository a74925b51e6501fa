package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/garageserver"
)

// The example app on a three-node Garage through a URL listing every node
// (failover, ADR 0015): when the node its client talks to is SIGKILLed it
// keeps serving — no loss, no exit — and a second instance is still
// refused, naming it.
func TestExample_Cluster_NodeKilled_KeepsServing_SecondInstanceRefused(t *testing.T) {
	c := garageserver.StartClusterWith(t, 3, garageserver.ClusterOptions{RPCTimeout: 2 * time.Second})
	tg := target{name: "garage-cluster", env: c.Env(), fresh: func(t *testing.T) (string, backend.Backend, string) {
		bucket := c.NewBucket(t)
		return c.URL(bucket, "apps/demo") + "&response_timeout=3s", c.Backend(t, bucket), "apps/demo"
	}}
	w := newWorld(t, tg)
	const heartbeat = time.Second
	a := w.start(t, "", "inst-a", nil, "--heartbeat", heartbeat.String(), "--stale-after", "10s")
	ready(t, a, "inst-a")

	// Every client starts on the first endpoint: that node goes.
	c.Nodes[0].Kill(t)
	time.Sleep(4 * heartbeat)
	select {
	case <-a.Done():
		t.Fatalf("the instance exited after its node was killed (code %d)\nstderr:\n%s", a.Wait(t, exitTimeout), a.Stderr.String())
	default:
	}
	if s := a.Stderr.String(); strings.Contains(s, "lost") {
		t.Fatalf("the instance reported a loss after a node kill:\n%s", s)
	}

	b := w.start(t, "", "inst-b", nil, "--heartbeat", heartbeat.String(), "--stale-after", "10s")
	if code := b.Wait(t, exitTimeout); code != 3 {
		t.Fatalf("second instance exit code = %d, want 3\nstderr:\n%s", code, b.Stderr.String())
	}
	if want := fmt.Sprintf(`state lock held by "inst-a" (pid %d on host `, a.Cmd.Process.Pid); !strings.Contains(b.Stderr.String(), want) {
		t.Fatalf("refusal does not name the first instance:\n%s", b.Stderr.String())
	}
	shutdown(t, a)
}
