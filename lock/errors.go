package lock

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

var (
	// ErrHeld means a live foreign instance holds the lock. Errors that
	// match it are *HeldError values, which name the holder.
	ErrHeld = errors.New("state lock held by another instance")
	// ErrLost means this instance held the lock and no longer does: another
	// instance took it over, it was broken, or the heartbeat could not
	// refresh it before the stale horizon. Errors that match it are
	// *LostError values.
	ErrLost = errors.New("state lock lost")
	// ErrReleased means the lock was released by its holder.
	ErrReleased = errors.New("state lock released")
)

// HeldError is the refusal to acquire (or break) a lock that a live foreign
// instance holds, or, for operator tools, an unreadable lock that is not
// yet stale and so may belong to one (then Unreadable is set and Holder is
// zero). It matches [ErrHeld] with errors.Is.
type HeldError struct {
	// Holder is the record on the store; zero when Unreadable is set.
	Holder Record
	// HeartbeatAge is how long ago the holder last refreshed the lock, on
	// the storage's clock.
	HeartbeatAge time.Duration
	// StaleAfter is the horizon after which the lock counts as stale: the
	// longer of the refuser's own and the one the holder recorded.
	StaleAfter time.Duration
	// StaleIn is how long until the lock becomes stale if its holder stops
	// refreshing it now.
	StaleIn time.Duration
	// Unreadable says why the lock object could not be read, when it was
	// refused unread (a caller with Options.RefuseUnreadable, or [Break]);
	// Holder is then zero: nobody can be named.
	Unreadable string
	// Refusal is what is refused, ending the message; empty means
	// "refusing to start".
	Refusal string
}

// Error names the holder, its PID, the heartbeat age and when the lock goes
// stale, and says what is refused. For a lock refused unread it says why
// it could not be read and that it may belong to a live instance instead
// of naming a holder.
func (e *HeldError) Error() string {
	refusal := e.Refusal
	if refusal == "" {
		refusal = "refusing to start"
	}
	if e.Unreadable != "" {
		return fmt.Sprintf("state lock object could not be read with the configured identities (%s); last written %s ago, stale after %s (in %s): it may belong to a live instance; %s",
			e.Unreadable, roundAge(e.HeartbeatAge), e.StaleAfter, roundAge(e.StaleIn), refusal)
	}
	return fmt.Sprintf("state lock held by %q (pid %d), last heartbeat %s ago, stale after %s (in %s): another instance is using this store; %s",
		e.Holder.InstanceID, e.Holder.PID, roundAge(e.HeartbeatAge), e.StaleAfter, roundAge(e.StaleIn), refusal)
}

// holderName names the holder for logs and wrapped errors.
func (e *HeldError) holderName() string {
	if e.Unreadable != "" {
		return "the holder of an unreadable lock"
	}
	return strconv.Quote(e.Holder.InstanceID)
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// LostError says why a held lock was lost. It matches [ErrLost] with
// errors.Is.
type LostError struct {
	// Holder is the record found on the store in our place, when the
	// heartbeat read one; nil when the lock was deleted, unreadable, or
	// never read (lost by the stale horizon).
	Holder *Record
	// Reason says what happened, in words.
	Reason string
}

// Error says the lock was lost, why, and who holds it now when known.
func (e *LostError) Error() string {
	if e.Holder != nil {
		return fmt.Sprintf("state lock lost: now held by %q (pid %d, host %s, epoch %d): %s",
			e.Holder.InstanceID, e.Holder.PID, e.Holder.Hostname, e.Holder.Epoch, e.Reason)
	}
	return "state lock lost: " + e.Reason
}

// Is makes errors.Is(err, ErrLost) true.
func (e *LostError) Is(target error) bool { return target == ErrLost }

// roundAge prints durations the way an operator reads them: whole seconds
// from one second on, milliseconds below.
func roundAge(d time.Duration) time.Duration {
	if d < 0 {
		d = 0
	}
	if d >= time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}
