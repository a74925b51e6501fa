package lock_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/s3"
	"github.com/cairnhq/state/internal/locktest"
	"github.com/cairnhq/state/testutil/garage"
	"github.com/cairnhq/state/testutil/versitygw"
)

// S3 timestamps (Last-Modified, Date) have one-second resolution, so the
// suite's windows are longer on real servers.
const s3StaleAfter = 4 * time.Second

// serverHarness is the suite's settings on a real server: a shorter race
// with delayed requests than on mem (the full figure runs with the
// locktest flags), and requests allowed three quarters of a heartbeat
// (the default half timed out on two loaded cores).
func serverHarness(nb func(t *testing.T) backend.Backend) locktest.Harness {
	return locktest.Harness{NewBackend: nb, StaleAfter: s3StaleAfter, RaceTrials: 10, DelayedRaceTrials: 2, MaxDelay: 500 * time.Millisecond,
		RequestTimeout: s3StaleAfter / 4 * 3 / 4}
}

// skipShort skips a real-time suite under -short: make test runs them;
// go test -short ./lock runs the suites on mem (virtual time) and the
// process tests on fs.
func skipShort(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the real-time suites (fs, servers) run in make test")
	}
}

func TestLock_Versitygw(t *testing.T) {
	skipShort(t)
	t.Parallel()
	srv := versitygw.Start(t)
	locktest.Run(t, serverHarness(func(t *testing.T) backend.Backend { return srv.Backend(t, srv.NewBucket(t)) }))
}

// versitygw with conditional writes forced off: the claims protocol on a
// second server.
func TestLock_VersitygwClaims(t *testing.T) {
	skipShort(t)
	t.Parallel()
	srv := versitygw.Start(t)
	locktest.Run(t, serverHarness(func(t *testing.T) backend.Backend {
		opts := srv.Options(srv.NewBucket(t))
		opts.Conditional = s3.ConditionalOff
		opts.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
		opts.HTTPClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b, err := s3.New(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.(io.Closer).Close() })
		return b
	}))
}

func TestLock_Garage(t *testing.T) {
	skipShort(t)
	t.Parallel()
	srv := garage.Start(t)
	locktest.Run(t, serverHarness(func(t *testing.T) backend.Backend { return srv.Backend(t, srv.NewBucket(t)) }))
}
