//go:build unix

package main

import (
	"errors"
	"syscall"
)

// processAlive reports whether pid names a process on this host. A process
// of another user still counts (EPERM). PID reuse is not detected: a false
// "alive" only delays a write until the lock is stale.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
