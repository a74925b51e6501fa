// Package garage starts a real Garage 2.5.0 (Deuxfleurs' S3 store) for a
// test: a throwaway single node ([Start]) on loopback, with its layout
// applied and a key that may create buckets. Garage accepts
// conditional-write headers and ignores them, so this is where the
// no-compare-and-swap path of the backend and the lock runs against a real
// server (cairn-state's own tests also run three-node clusters).
//
//	srv := garage.Start(t)
//	bucket := srv.NewBucket(t)
//	b := srv.Backend(t, bucket)          // an s3 backend on the node
//	url := srv.URL(bucket, "apps/one")   // the same, for a child process (with srv.Env())
//	oracle := srv.Minio(t)               // an independent client, to read the raw bucket
//
// # Where Garage comes from
//
// Process mode runs a garage binary from $GARAGE_BIN, else `garage` on
// PATH, else $HOME/.cache/cairn-state/garage-2.5.0/bin/garage, where
// scripts/install-garage.sh (run by make test) builds it from crates.io.
// Without a binary, container mode runs the dxflrs/garage image when a
// Docker engine answers (`docker info` succeeds). With neither, the test is
// skipped, or fails when CAIRN_REQUIRE_SERVERS=1 (see [testutil]).
package garage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/cairnhq/state/internal/garageserver"
	"github.com/cairnhq/state/internal/testserver"
	"github.com/cairnhq/state/testutil"
)

// Server is a Garage node started for one test. Its S3Server fields and
// methods give the endpoint, credentials, fresh buckets, backends and URLs.
type Server struct {
	testutil.S3Server
	// Dir holds the node's configuration, metadata and data.
	Dir string
	// ConfigPath is the node's garage.toml (inside the container in
	// container mode).
	ConfigPath string

	cli garageserver.CLI
}

// Start starts a single-node Garage and stops it when the test ends.
// Bring-up (server, layout, key) takes about a second, so each test gets
// its own node.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := garageserver.FindBinary()
	if err != nil {
		t.Fatalf("garage: %v", err)
	}
	if bin == "" {
		if garageserver.DockerAnswers() {
			return startContainer(t)
		}
		testserver.RequireServer(t, "garage", garageserver.HowTo)
	}
	var s *Server
	if err := testserver.Retry(func(attempt int) (p *testserver.Process, err error) {
		s, p, err = startProcess(t, bin, attempt)
		return p, err
	}); err != nil {
		t.Fatalf("starting garage (%s): %v", bin, err)
	}
	return s
}

func startProcess(t testing.TB, bin string, attempt int) (*Server, *testserver.Process, error) {
	dir := t.TempDir()
	s3Addr := "127.0.0.1:" + strconv.Itoa(testserver.FreePort(t))
	rpcAddr := "127.0.0.1:" + strconv.Itoa(testserver.FreePort(t))
	cfgPath := filepath.Join(dir, "garage.toml")
	cfg := garageserver.Config(filepath.Join(dir, "meta"), filepath.Join(dir, "data"), rpcAddr, rpcAddr, s3Addr, garageserver.RandomHex(32), 1, garageserver.ClusterOptions{})
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, nil, err
	}
	p, err := testserver.StartProcess(t, "garage", filepath.Join(dir, fmt.Sprintf("garage-%d.log", attempt)), bin, "-c", cfgPath, "server")
	if err != nil {
		return nil, nil, err
	}
	// A throwaway node's data is discarded; Garage can take seconds to
	// shut down gracefully, so it is killed at once.
	p.Grace = 0
	s := &Server{
		S3Server:   testutil.S3Server{Endpoint: "http://" + s3Addr, Region: garageserver.Region, Name: "garage"},
		Dir:        dir,
		ConfigPath: cfgPath,
		cli: func(ctx context.Context, args ...string) ([]byte, error) {
			return garageserver.Run(ctx, bin, append([]string{"-c", cfgPath}, args...)...)
		},
	}
	if err := s.bringUp(p); err != nil {
		return nil, p, err
	}
	return s, p, nil
}

// bringUp waits for the node to answer, then sets it up (Garage's own
// integration tests do the same).
func (s *Server) bringUp(p *testserver.Process) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// /health answers before a layout exists; `garage status` is the
	// readiness signal.
	if err := p.WaitReady(30*time.Second, func() error {
		_, err := s.cli(ctx, "status")
		return err
	}); err != nil {
		return err
	}
	return garageserver.Setup(ctx, &s.S3Server, s.cli)
}

// NewKey creates an access key allowed what allow grants on bucket —
// any of "read", "write", "owner" (Garage's `bucket allow` flags); none
// gives a key with no access to it — and returns its credentials. Use it
// to test what a restricted key may do.
func (s *Server) NewKey(t testing.TB, bucket string, allow ...string) (accessKey, secretKey string) {
	t.Helper()
	return garageserver.NewKey(t, s.cli, bucket, allow...)
}

// CLI runs a garage command against this node (`garage -c CONFIG ARGS…`,
// or through `docker exec` in container mode) and returns its output.
func (s *Server) CLI(t testing.TB, args ...string) string {
	t.Helper()
	return garageserver.Cmd(t, s.cli, args...)
}
