package lock

import (
	"os"
	"time"
)

// process identifies one running process well enough to tell, later and on
// the same host, whether it is still alive.
type process struct {
	pid   int
	ticks uint64    // start in clock ticks since boot; zero when unknown
	start time.Time // the same as a wall-clock time, for display
	scope string    // the PID space: empty when unknown
}

// liveness is what a probe of a recorded holder process found.
type liveness int

const (
	// inconclusive: another host or PID space, or the platform cannot
	// tell; only the stale horizon decides.
	inconclusive liveness = iota
	// alive: the process runs and, where start times are known, is the
	// same process that wrote the record.
	alive
	// dead: no such process.
	dead
	// reused: a process runs under that PID but started at another time.
	reused
)

func (l liveness) String() string {
	switch l {
	case alive:
		return "alive"
	case dead:
		return "dead"
	case reused:
		return "pid reused"
	}
	return "inconclusive"
}

func selfProcess() process {
	pid := os.Getpid()
	p := process{pid: pid}
	ticks, ok := selfStartTicks()
	if !ok {
		return p // no start time: our own records cannot be probed either
	}
	p.ticks = ticks
	p.start, _ = processStart(pid)
	// Our own start, read through /proc/<our pid>, must be the one
	// /proc/self gives: otherwise /proc is not our PID namespace's (a
	// container whose /proc is the host's, where our pid 1 names the
	// host's init), and no PID we read there means anything to us.
	if t, ok := processStartTicks(pid); ok && t == ticks {
		p.scope = processScope()
	}
	return p
}

// probeHolder judges the recorded holder from here. A holder is probed only
// when it ran in our PID space (same host, same boot, same PID namespace);
// anywhere else its PID means nothing to us. A probe that cannot tell —
// no start time recorded or readable — is inconclusive, never alive.
func probeHolder(self process, hostname string, rec Record) liveness {
	if rec.PID <= 0 || self.scope == "" || rec.ProcessScope != self.scope || rec.Hostname != hostname || rec.ProcessStartTicks == 0 {
		return inconclusive
	}
	exists, known := processExists(rec.PID)
	switch {
	case !known:
		return inconclusive
	case !exists:
		return dead
	}
	ticks, ok := processStartTicks(rec.PID)
	if !ok {
		// It ended between the two looks, or its start is hidden from us.
		if exists, known := processExists(rec.PID); known && !exists {
			return dead
		}
		return inconclusive
	}
	// Ticks since boot, in the same boot (the scope says so): exact, and
	// immune to wall-clock steps.
	if ticks != rec.ProcessStartTicks {
		return reused
	}
	return alive
}
