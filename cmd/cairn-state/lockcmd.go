package main

import (
	"context"
	"fmt"

	"github.com/cairnhq/state/lock"
)

type lockStatusDoc struct {
	Present  bool       `json:"present"`
	Readable bool       `json:"readable"`
	Stale    bool       `json:"stale"`
	Holder   *holderDoc `json:"holder,omitempty"`
	// Ages and horizons, in seconds, judged on the storage's clock.
	HeartbeatAgeSeconds *float64 `json:"heartbeat_age_seconds,omitempty"`
	StaleAfterSeconds   *float64 `json:"stale_after_seconds"`
	StaleInSeconds      *float64 `json:"stale_in_seconds,omitempty"`
	Version             string   `json:"version,omitempty"`
	// Unreadable says why a present lock could not be read.
	Unreadable string `json:"unreadable,omitempty"`
}

// runLockStatus shows the lock. It exits 0 whether or not the lock is held;
// without an identity (or with the wrong one) it still tells whether a lock
// object is present.
func runLockStatus(ctx context.Context, a *app, args []string) error {
	fs := a.flags("lock status")
	if _, err := a.parse(fs, args, 0, 0); err != nil {
		return err
	}
	st, err := a.openStore(ctx, false)
	if err != nil {
		return err
	}
	s, err := lock.Inspect(ctx, st, &lock.InspectOptions{StaleAfter: a.staleAfter})
	if err != nil {
		return fmt.Errorf("lock status: %w", err)
	}
	if a.json {
		doc := lockStatusDoc{Present: s.Present, Readable: s.Readable, Stale: s.Stale,
			StaleAfterSeconds: seconds(s.StaleAfter), Version: s.Version, Unreadable: s.Unreadable}
		if s.Present {
			doc.HeartbeatAgeSeconds = seconds(s.HeartbeatAge)
			doc.StaleInSeconds = seconds(s.StaleIn)
		}
		if s.Readable {
			h := holderOf(s.Record)
			doc.Holder = &h
		}
		a.emit(doc)
		return nil
	}
	switch {
	case !s.Present:
		a.printf("lock: not held\n")
	case !s.Readable && s.Stale:
		a.printf("lock: present but unreadable (STALE): %s\n", s.Unreadable)
		a.printf("  last written %s ago, stale after %s: the next instance takes it over, or: cairn-state lock break\n", ago(s.HeartbeatAge), s.StaleAfter)
	case !s.Readable:
		a.printf("lock: present but unreadable: %s\n", s.Unreadable)
		a.printf("  last written %s ago, stale after %s (in %s): it may belong to a live instance whose key is not configured here\n", ago(s.HeartbeatAge), s.StaleAfter, ago(s.StaleIn))
		a.printf("  pass the identity it is sealed to (--identity FILE) to see its holder; cairn-state writes and lock break refuse it until it is stale\n")
		a.printf("  (a booting application takes it over with a warning); if its holder is gone for good: cairn-state lock break --force\n")
	default:
		r := s.Record
		state := "live"
		if s.Stale {
			state = "STALE"
		}
		a.printf("lock: held by %q (%s)\n", r.InstanceID, state)
		a.printf("  host:       %s, pid %d, process started %s\n", r.Hostname, r.PID, timestamp(r.ProcessStart))
		a.printf("  mode:       %s, epoch %d\n", r.Mode, r.Epoch)
		a.printf("  acquired:   %s\n", timestamp(r.AcquiredAt))
		a.printf("  heartbeat:  %s ago (%s)\n", ago(s.HeartbeatAge), timestamp(r.Heartbeat))
		if s.Stale {
			a.printf("  stale:      yes, stale after %s; the next instance takes it over, or: cairn-state lock break\n", s.StaleAfter)
		} else {
			a.printf("  stale:      after %s (in %s)\n", s.StaleAfter, ago(s.StaleIn))
		}
	}
	return nil
}

type lockBreakDoc struct {
	// Removed is the record removed; zero for an unreadable lock.
	Removed    holderDoc `json:"removed"`
	Unreadable bool      `json:"unreadable"`
	Forced     bool      `json:"forced"`
}

// runLockBreak removes a stale lock, or a live one with --force and the
// --holder that matches its instance id, or a live one this run cannot read
// with --force alone (no holder can be matched). A refusal exits 3, naming
// the holder or saying the lock could not be read.
func runLockBreak(ctx context.Context, a *app, args []string) error {
	fs := a.flags("lock break")
	holder := fs.String("holder", "", "the instance `ID` that holds the lock, as lock status shows it; with --force, a live lock is removed only if it is still this holder's")
	force := fs.Bool("force", false, "remove a lock that is not stale: with --holder for a readable lock, alone for one this run cannot read")
	if _, err := a.parse(fs, args, 0, 0); err != nil {
		return err
	}
	st, err := a.openStore(ctx, false)
	if err != nil {
		return err
	}
	r, err := lock.Break(ctx, st, &lock.BreakOptions{Holder: *holder, Force: *force, StaleAfter: a.staleAfter})
	if err != nil {
		return err // "lock: break: …"
	}
	if a.json {
		a.emit(lockBreakDoc{Removed: holderOf(r), Unreadable: r.InstanceID == "", Forced: *force})
		return nil
	}
	if r.InstanceID == "" {
		a.printf("removed a lock that could not be read with the configured identities (sealed to other keys, or damaged)\n")
		return nil
	}
	a.printf("removed lock held by %q (host %s, pid %d, epoch %d, mode %s, last heartbeat %s)\n",
		r.InstanceID, r.Hostname, r.PID, r.Epoch, r.Mode, timestamp(r.Heartbeat))
	return nil
}
