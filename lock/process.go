package lock

import (
	"os"
	"time"
)

// process identifies one running process well enough to tell, later and on
// the same host, whether it is still alive.
type process struct {
	pid   int
	start time.Time // zero when the platform does not tell
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

// startTolerance absorbs the jitter of a start time computed from boot time
// and clock ticks (the kernel's boot time can move by a second under NTP).
const startTolerance = time.Second

func selfProcess() process {
	pid := os.Getpid()
	p := process{pid: pid, scope: processScope()}
	if st, ok := processStart(pid); ok {
		p.start = st
	}
	return p
}

// probeHolder judges the recorded holder from here. A holder is probed only
// when it ran in our PID space (same host, same boot, same PID namespace);
// anywhere else its PID means nothing to us.
func probeHolder(self process, hostname string, rec Record) liveness {
	if rec.PID <= 0 || self.scope == "" || rec.ProcessScope != self.scope || rec.Hostname != hostname {
		return inconclusive
	}
	exists, known := processExists(rec.PID)
	switch {
	case !known:
		return inconclusive
	case !exists:
		return dead
	}
	if rec.ProcessStart.IsZero() {
		return alive
	}
	st, ok := processStart(rec.PID)
	if !ok {
		// It ended between the two looks, or its start is hidden from us.
		if exists, known := processExists(rec.PID); known && !exists {
			return dead
		}
		return alive
	}
	d := st.Sub(rec.ProcessStart)
	if d < -startTolerance || d > startTolerance {
		return reused
	}
	return alive
}
