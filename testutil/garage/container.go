package garage

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/state/internal/garageserver"
	"github.com/cairnhq/state/internal/testserver"
	"github.com/cairnhq/state/testutil"
)

// startContainer runs the pinned Garage image with the same configuration
// and bring-up as process mode, the CLI going through `docker exec`. The
// container is removed when the test ends.
//
// Not exercised by this repository's CI (which has no Docker engine); it
// is here for users who run their tests that way.
func startContainer(t testing.TB) *Server {
	t.Helper()
	dir := t.TempDir()
	s3Port := testserver.FreePort(t)
	cfgPath := filepath.Join(dir, "garage.toml")
	cfg := garageserver.Config("/var/lib/garage/meta", "/var/lib/garage/data", "127.0.0.1:3901", "127.0.0.1:3901", "0.0.0.0:3900", garageserver.RandomHex(32), 1, garageserver.ClusterOptions{})
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	name := "cairn-garage-" + garageserver.RandomHex(6)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := garageserver.Run(ctx, "docker", "run", "-d", "--rm", "--name", name,
		"-p", "127.0.0.1:"+strconv.Itoa(s3Port)+":3900",
		"-v", cfgPath+":/etc/garage.toml:ro", garageserver.Image); err != nil {
		t.Fatalf("garage container: %v", err)
	}
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		if t.Failed() {
			if out, err := garageserver.Run(cctx, "docker", "logs", "--tail", "40", name); err == nil {
				t.Logf("garage container log, last lines:\n%s", out)
			}
		}
		_, _ = garageserver.Run(cctx, "docker", "rm", "-f", name)
	})
	s := &Server{
		S3Server:   testutil.S3Server{Endpoint: "http://127.0.0.1:" + strconv.Itoa(s3Port), Region: garageserver.Region, Name: "garage (container)"},
		Dir:        dir,
		ConfigPath: "/etc/garage.toml",
		cli: func(ctx context.Context, args ...string) ([]byte, error) {
			return garageserver.Run(ctx, "docker", append([]string{"exec", name, "/garage"}, args...)...)
		},
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := s.cli(ctx, "status")
		if err == nil {
			break
		}
		if time.Now().After(deadline) || strings.Contains(err.Error(), "No such container") {
			t.Fatalf("garage container not ready: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := garageserver.Setup(ctx, &s.S3Server, s.cli); err != nil {
		t.Fatalf("garage container: %v", err)
	}
	return s
}
