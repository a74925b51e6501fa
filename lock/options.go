package lock

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.opentelemetry.io/otel/metric"
)

// Default timings: a Recreate rollout (old pod stops, new pod starts) takes
// well under the stale window, and a holder whose storage is unreachable
// stops writing after 1.25 heartbeat intervals but keeps its lock for most
// of the stale window (docs/adr/0019).
const (
	defaultHeartbeatInterval = 60 * time.Second
	defaultStaleAfter        = 5 * time.Minute
	// defaultIntentWindow is how long a claim of an acquisition in
	// progress counts as live (claims mode), at most half of StaleAfter.
	defaultIntentWindow = 30 * time.Second
	// defaultRequestTimeout bounds each of the lock's own requests.
	defaultRequestTimeout = 10 * time.Second
)

// maxStaleAfter bounds the stale window, ours and the one a holder
// records: a record that asks for a longer one is judged with this one, so
// that a forged or absurd record cannot keep a lock forever.
const maxStaleAfter = 24 * time.Hour

// clockResolution is what storage timestamps may be off by: S3's
// Last-Modified and Date have one-second resolution. A modification time
// ahead of the storage's now by more than that is a clock anomaly; the
// windows' margins (margin) cover it in every judgement of an age.
const clockResolution = time.Second

// minIntentWindow keeps the intent window's margin at least one second,
// the storage timestamps' resolution.
const minIntentWindow = 4 * time.Second

// Options configure [Acquire]. The zero value gives the defaults.
type Options struct {
	// InstanceID names this instance in the lock; empty means the
	// hostname. Two live processes with the same instance id are a
	// misconfiguration: the second is refused as a duplicate. A process
	// whose predecessor with the same id cannot be probed (another host
	// or PID namespace) takes over once the predecessor's record has
	// missed a heartbeat (docs/adr/0019).
	InstanceID string
	// HeartbeatInterval is how often the holder refreshes the lock; zero
	// means 60 s, or StaleAfter/5 when that is shorter.
	HeartbeatInterval time.Duration
	// StaleAfter is how long after its last refresh a lock counts as
	// abandoned and may be taken over by another instance id (on two
	// clocks, docs/adr/0028); zero means 5 minutes, or
	// 5×HeartbeatInterval when that is longer. It must be at least twice
	// HeartbeatInterval, at most 24 hours,
	// and at least 4 s on storage whose timestamps have one-second
	// resolution (S3), so that its margin covers them.
	StaleAfter time.Duration
	// WaitForStale makes Acquire wait, polling with jitter, for a live
	// lock (a foreign holder, a duplicate, an unreadable lock) to be
	// released or go stale instead of refusing at once. Acquire's context
	// bounds the wait.
	WaitForStale bool
	// Mode forces a protocol: ModeClaims runs the claims protocol even
	// where the backend has conditional writes; ModeCAS fails on a
	// backend without them. Empty chooses from the backend's capabilities,
	// resolved first (the S3 backend probes the server once).
	Mode Mode
	// IntentWindow is, in claims mode, how long a claim of an acquisition
	// in progress counts as live on the storage's clock; an acquirer that
	// could not confirm within it (less its margin) starts over. Zero
	// means half of StaleAfter, within 4 s and 30 s; it
	// must be at least 4 s on storage with one-second timestamps.
	IntentWindow time.Duration
	// RequestTimeout bounds each request the lock sends, heartbeats
	// included, so that one hung request cannot eat the lease: it is cut
	// off and the heartbeat retries. Keep it below the heartbeat interval
	// and above the backend's own time to fail over to another endpoint
	// (the S3 backend's response timeout). Zero means 10 s,
	// or half the heartbeat interval when that is shorter.
	RequestTimeout time.Duration
	// Logger receives takeover warnings and loss reports; nil means
	// slog.Default().
	Logger *slog.Logger
	// MeterProvider, when not nil, receives the lock's metrics (see
	// "Metrics" in the package doc); nil records none.
	MeterProvider metric.MeterProvider
}

func (o Options) withDefaults() (Options, error) {
	if o.InstanceID == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			return o, fmt.Errorf("no instance id given and no hostname: %v", err)
		}
		o.InstanceID = h
	}
	if o.HeartbeatInterval < 0 || o.StaleAfter < 0 || o.IntentWindow < 0 || o.RequestTimeout < 0 {
		return o, fmt.Errorf("negative duration in Options (heartbeat %s, stale after %s, intent window %s, request timeout %s)",
			o.HeartbeatInterval, o.StaleAfter, o.IntentWindow, o.RequestTimeout)
	}
	switch {
	case o.HeartbeatInterval == 0 && o.StaleAfter == 0:
		o.HeartbeatInterval, o.StaleAfter = defaultHeartbeatInterval, defaultStaleAfter
	case o.HeartbeatInterval == 0:
		o.HeartbeatInterval = min(defaultHeartbeatInterval, o.StaleAfter/5)
	case o.StaleAfter == 0:
		o.StaleAfter = max(defaultStaleAfter, 5*o.HeartbeatInterval)
	}
	if o.HeartbeatInterval <= 0 || o.StaleAfter < 2*o.HeartbeatInterval {
		return o, fmt.Errorf("stale window %s must be at least twice the heartbeat interval %s", o.StaleAfter, o.HeartbeatInterval)
	}
	if o.StaleAfter > maxStaleAfter {
		return o, fmt.Errorf("stale window %s is longer than %s", o.StaleAfter, maxStaleAfter)
	}
	switch o.Mode {
	case "", ModeCAS, ModeClaims:
	default:
		return o, fmt.Errorf("unknown mode %q (want %q or %q)", o.Mode, ModeCAS, ModeClaims)
	}
	if o.IntentWindow == 0 {
		o.IntentWindow = min(defaultIntentWindow, max(o.StaleAfter/2, minIntentWindow))
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = min(defaultRequestTimeout, o.HeartbeatInterval/2)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

// margin is the safety allowance of a window d: a tenth, and at least
// 1.5 s up to a quarter of d, because storage timestamps have one-second
// resolution.
func margin(d time.Duration) time.Duration {
	return max(d/10, min(d/4, 1500*time.Millisecond))
}

// lease is how long after the send time of its last confirmed write the
// holder's fence stays open: 1.25 heartbeat intervals, less than the
// heartbeat and a half that a same-id watcher waits (docs/adr/0019).
func (o Options) lease() time.Duration { return o.HeartbeatInterval + o.HeartbeatInterval/4 }

// leaseLong is how long after its last confirmed write the holder keeps
// its lock (suspended, writes refused) before it counts it lost: the stale
// window less its margin, before anyone may judge the lock stale.
func (o Options) leaseLong() time.Duration { return o.StaleAfter - margin(o.StaleAfter) }

// intentDeadline is how long after sending its intent an acquirer may
// still accept its confirm's answer.
func (o Options) intentDeadline() time.Duration { return o.IntentWindow - margin(o.IntentWindow) }

// missedHeartbeat is how long a record must be watched unchanged before it
// counts as having missed a heartbeat: one interval and a half of the
// holder's (h, or ours for records that do not say).
func (o Options) missedHeartbeat(h time.Duration) time.Duration {
	if h <= 0 {
		h = o.HeartbeatInterval
	}
	return h + h/2
}

// poll is how often a watched or waited-for lock is looked at again.
func (o Options) poll(h time.Duration) time.Duration {
	if h <= 0 {
		h = o.HeartbeatInterval
	}
	return max(min(h/4, 5*time.Second), 10*time.Millisecond)
}
