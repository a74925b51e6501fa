package lock_test

import (
	"os"
	"testing"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/fs"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/lock/locktest"
	"go.uber.org/goleak"
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
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func TestLock_FS(t *testing.T) {
	t.Parallel()
	locktest.Run(t, locktest.Harness{NewBackend: newFS, StaleAfter: time.Second, RaceTrials: 10})
}

func TestLock_FSClaims(t *testing.T) {
	t.Parallel()
	locktest.Run(t, locktest.Harness{NewBackend: newFS, StaleAfter: time.Second, RaceTrials: 10, Mode: lock.ModeClaims})
}
