// Package lockadmin is the lock's administration, for cairn-state's own
// packages (`cairn-state lock status` and `lock break`, doctor, rekey, the
// examples): the lock read out and judged as an acquirer would, and broken
// for an operator. An application holds its [lock.Lock] and never needs
// these (docs/adr/0052).
package lockadmin

import (
	"context"
	"time"

	"github.com/cairnhq/state/internal/lockhook"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

var ops = lockhook.Get[*store.Store, lock.Record, lock.Mode, *lock.Lock]()

// Status is what [Inspect] found: the lock as an operator sees it, judged
// by the rules Acquire applies.
type Status = lockhook.Status[lock.Record, lock.Mode]

// Contender is one claim other than the holder's.
type Contender = lockhook.Contender[lock.Record]

// InspectOptions configure [Inspect]; BreakOptions configure [Break]. The
// zero values mean the defaults.
type (
	InspectOptions = lockhook.InspectOptions
	BreakOptions   = lockhook.BreakOptions
)

// The states of a lock record (lock.Record.State).
const (
	StateIntent   = lockhook.StateIntent   // a claim of an acquisition in progress
	StateHeld     = lockhook.StateHeld     // the lock object or a confirmed claim
	StateReleased = lockhook.StateReleased // a lock object nobody holds (compare-and-swap mode)
)

// Liveness is how the lock's rules judge a holder.
type Liveness = lockhook.Liveness

// The judgements of a holder (see lockhook for each one's meaning).
const (
	Live            = lockhook.Live
	Duplicate       = lockhook.Duplicate
	Stale           = lockhook.Stale
	Dead            = lockhook.Dead
	MissedHeartbeat = lockhook.MissedHeartbeat
	Unreadable      = lockhook.Unreadable
	UnreadableStale = lockhook.UnreadableStale
	Watching        = lockhook.Watching
)

// Inspect reads the lock of st without changing anything, for `cairn-state
// lock status`, and judges it as an acquirer with another instance id
// would. An absent lock is a Status with Present false, not an error.
func Inspect(ctx context.Context, st *store.Store, o InspectOptions) (Status, error) {
	return ops.Inspect(ctx, st, o)
}

// Break breaks the lock of st for an operator (`cairn-state lock break`):
// a lock that a boot would take over (stale, or held by a dead process of
// this host), readable or not, always; a live readable one only with
// o.Force and o.Holder equal to the holder's instance id; a live
// unreadable one (sealed to keys not configured here, so it may belong to a
// running instance) only with o.Force and no o.Holder. Otherwise it fails
// with a *lock.HeldError and leaves the lock alone. It returns the record
// it broke (zero for an unreadable one), and fails with an error wrapping
// backend.ErrNotFound when no instance holds the lock (a released lock
// object included).
//
// In compare-and-swap mode Break writes a released record in place of the
// holder's, conditionally on the version it judged (a lock that changed
// hands meanwhile is left alone, the error wrapping
// backend.ErrPreconditionFailed): the holder's next heartbeat fails its
// condition and learns it lost the lock, and the next acquisition takes
// the record at once and counts on from its epoch (docs/adr/0066). In
// claims mode Break first writes an epoch marker above the holder's, so
// that the holder learns at its next heartbeat that it lost the lock and
// the next acquisition counts on from there, then deletes the holder's
// claims.
func Break(ctx context.Context, st *store.Store, o BreakOptions) (lock.Record, error) {
	return ops.Break(ctx, st, o)
}

// Owns reports whether name (a state name, as store.List reports it) is
// one of the lock's own objects: the lock object, a claim or an epoch
// marker. Tools that re-seal every object skip them (the lock rewrites its
// own); tools that verify every object open them like any other.
func Owns(name string) bool { return ops.Owns(name) }

// Guards reports whether l is the lock of st: the same backend and the
// same key prefix (root). Code that writes under the lock's protection,
// such as the migration runner, checks it so that a lock held on one store
// does not license writes to another.
func Guards(l *lock.Lock, st *store.Store) bool { return ops.Guards(l, st) }

// Deadline returns when l's fence closes unless a heartbeat confirms the
// lock again: the send time of its last confirmed write plus 1.25
// heartbeat intervals. Writes through l.Fence's views run under it. After
// loss or release it is a time in the past.
func Deadline(l *lock.Lock) (time.Time, bool) { return ops.Deadline(l) }
