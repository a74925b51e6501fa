package lock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/store"
)

// Status is what [Inspect] found: the lock as an operator sees it.
type Status struct {
	// Present reports that a lock object exists.
	Present bool
	// Readable reports that it opened and holds a lock record.
	Readable bool
	// Stale reports that it was not refreshed for StaleAfter, on the
	// storage's clock. An unreadable lock is judged by its age like any
	// other: a young one may belong to a live instance whose key is not
	// configured here (though a booting application would take it over).
	Stale bool
	// Record is the lock record, when readable.
	Record Record
	// HeartbeatAge is how long ago the object was last written, on the
	// storage's clock.
	HeartbeatAge time.Duration
	// StaleAfter is the horizon used to judge staleness: the longer of
	// the one asked for and the one the holder recorded.
	StaleAfter time.Duration
	// StaleIn is how long until the lock goes stale without a refresh.
	StaleIn time.Duration
	// Version is the backend version of the lock object.
	Version string
	// Unreadable says why the object could not be read, when Present and
	// not Readable.
	Unreadable string
}

// Inspect reads the lock of st without changing anything, for `cairn-state
// lock status`. staleAfter is the horizon to judge staleness by, unless the
// holder recorded a longer one; zero means DefaultStaleAfter. An absent lock is a Status with Present false, not an
// error.
func Inspect(ctx context.Context, st *store.Store, staleAfter time.Duration) (Status, error) {
	if staleAfter <= 0 {
		staleAfter = DefaultStaleAfter
	}
	obs, err := observe(ctx, st.Internal(), true)
	if err != nil {
		return Status{}, err
	}
	s := Status{StaleAfter: staleAfter}
	if !obs.present {
		return s, nil
	}
	window := obs.window(staleAfter)
	s.Present, s.Readable, s.Version = true, obs.readable, obs.info.Version
	s.HeartbeatAge, s.StaleAfter, s.StaleIn = obs.age, window, obs.staleIn(window)
	// An unreadable lock is judged by its age too: its modification time
	// is known even when its content is not.
	s.Stale = obs.age >= window
	if obs.readable {
		s.Record = obs.rec
	} else {
		s.Unreadable = obs.why.Error()
	}
	return s, nil
}

// BreakOptions configure [Break].
type BreakOptions struct {
	// Holder must be the current holder's instance id for a live lock to
	// be broken (with Force); it guards against breaking a lock that
	// changed hands since the operator looked. It must be empty to break
	// a live unreadable lock, whose holder cannot be read.
	Holder string
	// Force allows breaking a live lock.
	Force bool
	// StaleAfter is the horizon to judge staleness by, unless the holder
	// recorded a longer one; zero means DefaultStaleAfter.
	StaleAfter time.Duration
	// Logger receives warnings (an unreadable saved epoch); nil means
	// slog.Default().
	Logger *slog.Logger
}

// Break removes the lock of st for an operator (`cairn-state lock break`):
// a stale lock always, readable or not (staleness is judged on the
// storage's clock, with the longer of opts.StaleAfter and the window the
// holder recorded); a live readable one only with opts.Force and
// opts.Holder equal to the holder's instance id; a live unreadable one
// (sealed to keys not configured here, so it may belong to a running
// instance) only with opts.Force and no opts.Holder, since no holder can
// be matched. Otherwise it fails with a *HeldError (Unreadable set for an
// unreadable lock) and leaves the lock alone. It returns the record it
// removed (zero for an unreadable one). It fails with an error wrapping
// backend.ErrNotFound when there is no lock. Where the backend has
// conditional writes the delete is conditional on the version inspected,
// so a lock that changed hands meanwhile is not removed (the error then
// wraps backend.ErrPreconditionFailed). A holder whose lock is broken
// learns it at its next heartbeat and stops writing.
//
// Before deleting a readable lock, Break saves its epoch in [EpochName],
// so that the next acquisition's epoch is still one more; if that write
// fails, nothing is deleted and the error is returned.
func Break(ctx context.Context, st *store.Store, opts BreakOptions) (Record, error) {
	staleAfter := opts.StaleAfter
	if staleAfter <= 0 {
		staleAfter = DefaultStaleAfter
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	in := st.Internal()
	obs, err := observe(ctx, in, true)
	if err != nil {
		return Record{}, err
	}
	if !obs.present {
		return Record{}, fmt.Errorf("lock: break: no state lock to break: %w", backend.ErrNotFound)
	}
	window := obs.window(staleAfter)
	switch {
	case obs.age >= window:
		// Stale: removed without force, readable or not.
	case obs.readable && (!opts.Force || opts.Holder != obs.rec.InstanceID):
		h := obs.held(window, fmt.Sprintf("refusing to break a live lock unless forced with the holder's instance id %q", obs.rec.InstanceID))
		if opts.Force && opts.Holder != "" {
			h.Refusal = fmt.Sprintf("refusing to break it: the holder is %q, not %q", obs.rec.InstanceID, opts.Holder)
		}
		return Record{}, h
	case !obs.readable && (!opts.Force || opts.Holder != ""):
		// Its holder cannot be read, so no holder id can be matched: only
		// Force alone breaks it.
		h := obs.held(window, "refusing to break it unless forced without a holder id (its holder cannot be read, so no holder id can be matched)")
		if opts.Force {
			h.Refusal = fmt.Sprintf("refusing to break it: its holder cannot be read, so it cannot be checked against %q; it is broken only when forced without a holder id", opts.Holder)
		}
		return Record{}, h
	}
	if obs.readable {
		// Save its epoch first, so that the next acquisition counts on
		// from it (an unreadable lock's epoch is unknown).
		if err := saveEpoch(ctx, in, obs.rec, nil, logger); err != nil {
			return Record{}, fmt.Errorf("lock: break: lock left in place: %w", err)
		}
	}
	var do store.DeleteOptions
	if in.ConditionalWrites() {
		do.IfVersion = obs.info.Version
	}
	if err := in.Delete(ctx, Name, do); err != nil {
		if errors.Is(err, backend.ErrPreconditionFailed) {
			return Record{}, fmt.Errorf("lock: break: the lock changed since it was inspected; inspect it again: %w", err)
		}
		return Record{}, fmt.Errorf("lock: break: %w", err)
	}
	return obs.rec, nil
}
