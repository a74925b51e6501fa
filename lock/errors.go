package lock

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

var (
	// ErrHeld means a live instance holds the lock: a foreign one, a
	// duplicate with our instance id, or one whose lock this process
	// cannot read. Errors that match it are *HeldError values.
	ErrHeld = errors.New("state lock held by another instance")
	// ErrLost means this instance held the lock and no longer does:
	// another instance took it over, it was broken, or no heartbeat could
	// be confirmed before the stale horizon. Errors that match it are
	// *LostError values.
	ErrLost = errors.New("state lock lost")
	// ErrReleased means the lock was released by its holder.
	ErrReleased = errors.New("state lock released")
	// ErrSuspended means the lock's lease ran out before a heartbeat
	// could confirm it (the storage is slow or unreachable): writes are
	// refused until one does. The lock is not lost yet.
	ErrSuspended = errors.New("state lock not confirmed recently: writes paused until a heartbeat confirms it")
	// ErrEpochExhausted means the fencing epoch would pass 2^64−1: an
	// epoch marker with an absurd number was written by hand or forged.
	ErrEpochExhausted = errors.New("state lock epoch exhausted")
)

// HeldError is the refusal to acquire (or break) a lock that a live
// instance holds. It carries facts only; callers add their own words
// ("refusing to start: %w"). It matches [ErrHeld] with errors.Is.
type HeldError struct {
	// Holder is the holder's record; zero when Unreadable is set.
	Holder Record
	// Object is the state name of the lock object or claim refused on.
	Object string
	// Duplicate reports that the holder runs with our instance id and is
	// alive (probed on this host) or kept heartbeating while watched.
	Duplicate bool
	// Unreadable says why the lock object could not be read (a key this
	// process does not hold, garbage, a corrupt object file); Holder is
	// then zero.
	Unreadable string
	// ClockAnomaly reports that the object's modification time is ahead
	// of the storage's clock, so its age is unknown; it is judged by
	// watching it instead.
	ClockAnomaly bool
	// HeartbeatAge is how long ago the lock was last written, on the
	// storage's clock (zero when ClockAnomaly is set).
	HeartbeatAge time.Duration
	// StaleAfter is the window after which the lock counts as stale: the
	// longer of the judge's own and the one the holder recorded.
	StaleAfter time.Duration
	// StaleIn is how long until the lock becomes stale if its holder stops
	// refreshing it now.
	StaleIn time.Duration
}

// Error names the holder, its PID and host, the heartbeat age and when the
// lock goes stale; for a duplicate it says so and what to do.
func (e *HeldError) Error() string {
	age := "last heartbeat " + roundAge(e.HeartbeatAge).String() + " ago"
	if e.ClockAnomaly {
		age = "last written at a time ahead of the storage's clock (age unknown; judged by watching it)"
	}
	horizon := fmt.Sprintf("stale after %s (in %s)", e.StaleAfter, roundAge(e.StaleIn))
	switch {
	case e.Unreadable != "":
		return fmt.Sprintf("state lock held by an instance whose key this process does not hold (%s): %s, %s",
			e.Unreadable, strings.Replace(age, "last heartbeat", "last written", 1), horizon)
	case e.Duplicate:
		return fmt.Sprintf("another live process uses this instance id: state lock held by %q (pid %d on host %s), %s, %s: give each instance its own instance id",
			e.Holder.InstanceID, e.Holder.PID, e.Holder.Hostname, age, horizon)
	}
	return fmt.Sprintf("state lock held by %q (pid %d on host %s), %s, %s",
		e.Holder.InstanceID, e.Holder.PID, e.Holder.Hostname, age, horizon)
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
	// Holder is the record found in our place, when one was read; nil
	// when the lock was removed, unreadable, or never read (lost by the
	// stale horizon).
	Holder *Record
	// Reason says what happened, in words.
	Reason string
	// cause classifies the loss for the losses counter (metrics.go).
	cause lossReason
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

// epochExhausted is the refusal to count on from object, which holds
// epoch, the largest there is (ErrEpochExhausted).
func epochExhausted(object string, epoch uint64) error {
	return fmt.Errorf("%s holds epoch %d, the largest there is; remove it if it was written by hand: %w", object, epoch, ErrEpochExhausted)
}

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
