//go:build unix && !linux

package lock

import (
	"errors"
	"syscall"
	"time"
)

// Other Unix systems (macOS, the BSDs) expose no process start time without
// cgo or sysctl parsing, so a live PID cannot be told from a reused one:
// records carry no start and no scope, and PIDs are never probed (the
// stale horizon decides).

func processStart(int) (time.Time, bool) { return time.Time{}, false }

func processStartTicks(int) (uint64, bool) { return 0, false }

func selfStartTicks() (uint64, bool) { return 0, false }

func processExists(pid int) (exists, known bool) {
	err := syscall.Kill(pid, 0)
	switch {
	case err == nil, errors.Is(err, syscall.EPERM):
		return true, true
	case errors.Is(err, syscall.ESRCH):
		return false, true
	}
	return false, false
}

// processScope is empty: without a boot id and PID namespace we cannot be
// sure a recorded PID belongs to our PID space, so PIDs are not probed.
func processScope() string { return "" }
