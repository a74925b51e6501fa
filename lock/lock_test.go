package lock_test

import (
	"io"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/fs"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/locktest"
	"github.com/cairnhq/state/lock"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	// Every lock a test takes is released or lost before it ends; a
	// heartbeat goroutine still running afterwards is a leak.
	goleak.VerifyTestMain(m)
}

func TestLock_Mem(t *testing.T) {
	locktest.Run(t, locktest.Harness{
		NewBackend: func(t *testing.T) backend.Backend { return mem.New(mem.Options{}) },
		Synctest:   true,
	})
}

func TestLock_MemClaims(t *testing.T) {
	locktest.Run(t, locktest.Harness{
		NewBackend: func(t *testing.T) backend.Backend { return mem.New(mem.Options{NoConditionalWrites: true}) },
		Synctest:   true,
		MaxDelay:   2 * time.Second, // the figure: every request delayed up to 2 s
	})
}

func newFS(t *testing.T) backend.Backend {
	b, err := fs.New(t.TempDir(), fs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.(io.Closer).Close() })
	return b
}

// fsHarness is the suite on real files in real time, with the windows of
// the S3 servers' suite: with a 1 s window (heartbeats every 250 ms,
// requests cut off after 125 ms) a loaded machine timed requests out and
// suspended fences in a dozen cases. The race with delayed requests
// delays them up to 500 ms, as on the servers (the 2 s figure runs on mem
// in make test, and on every backend with -locktest.max-delay 2s).
func fsHarness(mode lock.Mode) locktest.Harness {
	return locktest.Harness{NewBackend: newFS, StaleAfter: s3StaleAfter, RaceTrials: 10, Mode: mode,
		MaxDelay: 500 * time.Millisecond, RequestTimeout: s3StaleAfter / 4 * 3 / 4}
}

func TestLock_FS(t *testing.T) {
	skipShort(t) // real time, 4 s windows: the mem suites check the same cases in virtual time
	t.Parallel()
	locktest.Run(t, fsHarness(""))
}

func TestLock_FSClaims(t *testing.T) {
	skipShort(t) // real time, 4 s windows: the mem suites check the same cases in virtual time
	t.Parallel()
	locktest.Run(t, fsHarness(lock.ModeClaims))
}
