//go:build !unix

package lock

import "time"

// On Windows and other systems the holder's PID is recorded for operators
// but never probed: only the instance id and the stale horizon decide.

func processStart(int) (time.Time, bool)     { return time.Time{}, false }
func processStartTicks(int) (uint64, bool)   { return 0, false }
func selfStartTicks() (uint64, bool)         { return 0, false }
func processExists(int) (exists, known bool) { return false, false }
func processScope() string                   { return "" }
