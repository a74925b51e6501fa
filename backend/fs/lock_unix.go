//go:build unix

package fs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

func platformSupported() error { return nil }

// lock takes the backend's exclusive lock: first this process's semaphore,
// then flock(2) on the lock file, which excludes other processes (each
// call opens its own file description, so the flock is per call). Waiting
// honours ctx; flock itself is polled without blocking for the same reason.
func (b *fsBackend) lock(ctx context.Context) (unlock func(), err error) {
	select {
	case b.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	release := func() { <-b.sem }
	f, err := b.root.OpenFile(lockName, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		release()
		return nil, fmt.Errorf("fs: open lock file in %s: %w", b.dir, classify(err))
	}
	wait := 50 * time.Microsecond
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			release()
			return nil, fmt.Errorf("fs: flock %s in %s: %w", lockName, b.dir, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			f.Close()
			release()
			return nil, ctx.Err()
		}
		wait = min(2*wait, 5*time.Millisecond)
	}
	return func() {
		// Closing the file releases the flock.
		f.Close()
		release()
	}, nil
}
