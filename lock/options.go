package lock

import (
	"fmt"
	"log/slog"
	"os"
	"time"
)

// Default timings: a Recreate rollout (old pod stops, new pod starts) takes
// well under the stale horizon, and a holder misses four heartbeats before
// anyone may take over.
const (
	DefaultHeartbeatInterval = 60 * time.Second
	DefaultStaleAfter        = 5 * time.Minute
	DefaultSettleDelay       = time.Second
)

// Options configure [Acquire]. The zero value gives the defaults.
type Options struct {
	// InstanceID names this instance in the lock; empty means the
	// hostname. Two processes with the same instance id are taken to be
	// the same instance restarted: the newer takes the lock at once.
	InstanceID string
	// HeartbeatInterval is how often the holder refreshes the lock; zero
	// means DefaultHeartbeatInterval, or StaleAfter/5 when that is shorter.
	HeartbeatInterval time.Duration
	// StaleAfter is how long after its last refresh (on the storage's
	// clock) a lock counts as abandoned and may be taken over; zero means
	// DefaultStaleAfter, or 5×HeartbeatInterval when that is longer. It
	// must be at least twice HeartbeatInterval.
	StaleAfter time.Duration
	// WaitForStale makes Acquire wait, polling, for a live foreign lock to
	// be released or go stale instead of refusing at once. Acquire's
	// context bounds the wait.
	WaitForStale bool
	// SettleDelay is how long advisory mode waits between writing the lock
	// and reading it back to catch a racing writer; zero means
	// DefaultSettleDelay, negative skips the read-back. Unused in
	// compare-and-swap mode.
	SettleDelay time.Duration
	// RefuseUnreadable makes Acquire refuse, with a *HeldError, a lock
	// object it cannot read (wrong key, garbage) until it is stale on the
	// storage's clock, instead of taking it over at once with a warning.
	// It is for operator tools, whose identities may simply be the wrong
	// ones for a live instance's lock; an application booting leaves it
	// off, so that an unreadable lock never bricks a boot.
	RefuseUnreadable bool
	// Refusal is what a refusal says is refused, at the end of the
	// *HeldError's message; empty means "refusing to start". The CLI's
	// writes say "refusing to write".
	Refusal string
	// Logger receives takeover warnings and loss reports; nil means
	// slog.Default().
	Logger *slog.Logger
}

func (o Options) withDefaults() (Options, error) {
	if o.InstanceID == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			return o, fmt.Errorf("lock: no instance id given and no hostname: %v", err)
		}
		o.InstanceID = h
	}
	if o.HeartbeatInterval < 0 || o.StaleAfter < 0 {
		return o, fmt.Errorf("lock: negative heartbeat interval %s or stale horizon %s", o.HeartbeatInterval, o.StaleAfter)
	}
	switch {
	case o.HeartbeatInterval == 0 && o.StaleAfter == 0:
		o.HeartbeatInterval, o.StaleAfter = DefaultHeartbeatInterval, DefaultStaleAfter
	case o.HeartbeatInterval == 0:
		o.HeartbeatInterval = min(DefaultHeartbeatInterval, o.StaleAfter/5)
	case o.StaleAfter == 0:
		o.StaleAfter = max(DefaultStaleAfter, 5*o.HeartbeatInterval)
	}
	if o.HeartbeatInterval <= 0 || o.StaleAfter < 2*o.HeartbeatInterval {
		return o, fmt.Errorf("lock: stale horizon %s must be at least twice the heartbeat interval %s", o.StaleAfter, o.HeartbeatInterval)
	}
	if o.SettleDelay == 0 {
		o.SettleDelay = DefaultSettleDelay
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

// leaseHorizon is how long after the start of its last confirmed write the
// holder still trusts its lock. It is shorter than StaleAfter so that the
// holder stops writing before anyone else may judge the lock stale: by a
// tenth of StaleAfter, and by at least 1.5 s (up to a quarter of
// StaleAfter) because S3 timestamps have one-second resolution, which can
// make a lock look up to a second older than it is.
func (o Options) leaseHorizon() time.Duration {
	margin := max(o.StaleAfter/10, min(o.StaleAfter/4, 1500*time.Millisecond))
	return o.StaleAfter - margin
}
