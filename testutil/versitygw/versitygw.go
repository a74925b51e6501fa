// Package versitygw starts a real versitygw (Versity S3 Gateway, POSIX
// backend) for a test: an S3 server with conditional writes, so the
// compare-and-swap path runs against a real server.
//
// The binary comes from $VERSITYGW_BIN, else `versitygw` on PATH, else
// $HOME/.cache/cairn-state/versitygw-v1.8.0/bin/versitygw (where make test
// installs it). Without one the test is skipped, or fails when
// CAIRN_REQUIRE_SERVERS=1 (see [testutil]).
package versitygw

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/cairnhq/state/internal/testserver"
	"github.com/cairnhq/state/testutil"
)

// Version is the versitygw release the tests are pinned to.
const Version = "v1.8.0"

// HowTo says how to get versitygw; it is the skip message's advice.
const HowTo = "install it with `GOBIN=$HOME/.cache/cairn-state/versitygw-" + Version +
	"/bin go install github.com/versity/versitygw/cmd/versitygw@" + Version +
	"` (make test does), or set VERSITYGW_BIN to its path"

// Server is a versitygw started for one test. Its S3Server fields and
// methods give the endpoint, credentials, fresh buckets, backends and URLs.
type Server struct {
	testutil.S3Server
	// Dir is the POSIX directory the gateway serves; each bucket is a
	// subdirectory.
	Dir string
}

// Start starts a versitygw on a free loopback port, serving a fresh
// temporary directory, and stops it when the test ends. Starting one takes
// a fraction of a second, so each test gets its own.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := testserver.FindBinary("VERSITYGW_BIN", "versitygw", testserver.CachePath("versitygw-"+Version+"/bin/versitygw"))
	if err != nil {
		t.Fatalf("versitygw: %v", err)
	}
	if bin == "" {
		testserver.RequireServer(t, "versitygw", HowTo)
	}
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	access, secret := randomHex(10), randomHex(20)
	const region = "us-east-1"
	var srv *Server
	err = testserver.Retry(func(attempt int) (*testserver.Process, error) {
		addr := "127.0.0.1:" + strconv.Itoa(testserver.FreePort(t))
		logPath := filepath.Join(tmp, fmt.Sprintf("versitygw-%d.log", attempt))
		p, err := testserver.StartProcess(t, "versitygw", logPath, bin,
			"--port", addr, "--access", access, "--secret", secret, "--region", region,
			"--quiet", "posix", dir)
		if err != nil {
			t.Fatal(err)
		}
		srv = &Server{
			S3Server: testutil.S3Server{Endpoint: "http://" + addr, Region: region, AccessKey: access, SecretKey: secret, Name: "versitygw"},
			Dir:      dir,
		}
		return p, p.WaitReady(20*time.Second, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			return srv.Ready(ctx)
		})
	})
	if err != nil {
		t.Fatalf("starting versitygw (%s): %v", bin, err)
	}
	return srv
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
