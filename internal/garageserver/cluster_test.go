package garageserver_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/cairnhq/state/internal/garageserver"
)

func put(t *testing.T, c *minio.Client, bucket, key, value string) {
	t.Helper()
	if _, err := c.PutObject(t.Context(), bucket, key, strings.NewReader(value), int64(len(value)), minio.PutObjectOptions{}); err != nil {
		t.Fatalf("put %q: %v", key, err)
	}
}

func read(ctx context.Context, c *minio.Client, bucket, key string) (string, error) {
	obj, err := c.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return "", err
	}
	defer obj.Close()
	data, err := io.ReadAll(obj)
	return string(data), err
}

// The cluster's helpers do what they say on a real three-node Garage: the
// layout spans three zones with three copies, every node serves what any
// node took, and each control (kill, restart, pause, resume) acts on one
// node only.
func TestCluster_ThreeNodes_ServeEachOthersWritesAndObeyTheirControls(t *testing.T) {
	start := time.Now()
	phase := func(s string) { t.Logf("%6.2fs %s", time.Since(start).Seconds(), s) }
	// Garage's nodes wait up to rpc_timeout_msec (300 s by default) on a
	// paused peer before asking another; 5 s keeps the pause below short.
	c := garageserver.StartClusterWith(t, 3, garageserver.ClusterOptions{RPCTimeout: 5 * time.Second})
	phase("started")
	if got := len(strings.Split(c.Endpoint, ",")); got != 3 {
		t.Fatalf("cluster Endpoint %q lists %d endpoints, want 3", c.Endpoint, got)
	}
	layout := c.CLI(t, "layout", "show")
	for _, want := range []string{"Current cluster layout version: 1", "dc1", "dc2", "dc3"} {
		if !strings.Contains(layout, want) {
			t.Errorf("layout lacks %q:\n%s", want, layout)
		}
	}
	bucket := c.NewBucket(t)
	put(t, c.Nodes[0].Minio(t), bucket, "a", "written on node 1")
	for _, n := range c.Nodes {
		if got, err := read(t.Context(), n.Minio(t), bucket, "a"); err != nil || got != "written on node 1" {
			t.Errorf("node %d reads %q, %v", n.Index+1, got, err)
		}
	}

	// A killed node refuses connections; the others keep serving and
	// taking writes (two of three copies are a write quorum).
	phase("read from all")
	c.Nodes[2].Kill(t)
	if c.Nodes[2].Running() {
		t.Error("node 3 runs after Kill")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	_, err := read(ctx, c.Nodes[2].Minio(t), bucket, "a")
	cancel()
	if err == nil {
		t.Error("the killed node answered")
	}
	put(t, c.Nodes[1].Minio(t), bucket, "b", "written while node 3 was down")

	phase("wrote with node 3 down")
	// Restarted, it is back in the cluster and serves the write it missed.
	c.Nodes[2].Restart(t)
	phase("restarted")
	if got, err := read(t.Context(), c.Nodes[2].Minio(t), bucket, "b"); err != nil || got != "written while node 3 was down" {
		t.Errorf("restarted node 3 reads %q, %v", got, err)
	}

	// A paused node accepts connections and answers nothing until resumed.
	phase("read from restarted")
	c.Nodes[1].Pause(t)
	ctx, cancel = context.WithTimeout(t.Context(), time.Second)
	_, err = read(ctx, c.Nodes[1].Minio(t), bucket, "a")
	cancel()
	if err == nil {
		t.Error("the paused node answered")
	}
	if got, err := read(t.Context(), c.Nodes[0].Minio(t), bucket, "a"); err != nil || got != "written on node 1" {
		t.Errorf("node 1 with node 2 paused reads %q, %v", got, err)
	}
	phase("paused reads")
	c.Nodes[1].Resume(t)
	if got, err := read(t.Context(), c.Nodes[1].Minio(t), bucket, "a"); err != nil || got != "written on node 1" {
		t.Errorf("resumed node 2 reads %q, %v", got, err)
	}
	phase("resumed read")
	if !bytes.Contains([]byte(c.URL(bucket, "")), []byte("endpoint=")) {
		t.Errorf("cluster URL %q has no endpoint", c.URL(bucket, ""))
	}
}
