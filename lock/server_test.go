package lock_test

import (
	"testing"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/lock/locktest"
	"github.com/cairnhq/state/testutil/garage"
	"github.com/cairnhq/state/testutil/versitygw"
)

// S3 timestamps (Last-Modified, Date) have one-second resolution, so the
// suite's horizons are longer on real servers.
const s3StaleAfter = 4 * time.Second

func TestLock_Versitygw(t *testing.T) {
	srv := versitygw.Start(t)
	locktest.Run(t, locktest.Harness{
		NewBackend: func(t *testing.T) backend.Backend { return srv.Backend(t, srv.NewBucket(t)) },
		StaleAfter: s3StaleAfter,
	})
}

func TestLock_Garage(t *testing.T) {
	srv := garage.Start(t)
	locktest.Run(t, locktest.Harness{
		NewBackend: func(t *testing.T) backend.Backend { return srv.Backend(t, srv.NewBucket(t)) },
		StaleAfter: s3StaleAfter,
	})
}
