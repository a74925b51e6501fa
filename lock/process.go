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

// startTolerance absorbs the jitter of a start time computed from boot time
// and clock ticks, for records older than ProcessStartTicks only: the
// kernel's boot time moves with wall-clock steps.
const startTolerance = time.Second

func selfProcess() process {
	pid := os.Getpid()
	p := process{pid: pid, scope: processScope()}
	if t, ok := processStartTicks(pid); ok {
		p.ticks = t
		p.start, _ = processStart(pid)
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
	if rec.ProcessStartTicks == 0 && rec.ProcessStart.IsZero() {
		return alive
	}
	ticks, ok := processStartTicks(rec.PID)
	if !ok {
		// It ended between the two looks, or its start is hidden from us.
		if exists, known := processExists(rec.PID); known && !exists {
			return dead
		}
		return alive
	}
	if rec.ProcessStartTicks != 0 {
		// Ticks since boot, in the same boot (the scope says so): exact,
		// and immune to wall-clock steps.
		if ticks != rec.ProcessStartTicks {
			return reused
		}
		return alive
	}
	// A record from before ticks were recorded: compare wall-clock
	// starts, which move with the boot time.
	st, ok := processStart(rec.PID)
	if !ok {
		return alive
	}
	if d := st.Sub(rec.ProcessStart); d < -startTolerance || d > startTolerance {
		return reused
	}
	return alive
}
