package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairnhq/state/internal/lockadmin"
	"github.com/cairnhq/state/lock"
)

type lockStatusDoc struct {
	Present  bool `json:"present"`
	Readable bool `json:"readable"`
	Stale    bool `json:"stale"`
	// Liveness is how the lock's rules judge the holder: live, stale, dead
	// (its process is gone from this host), unreadable, … (lockadmin.Liveness).
	Liveness string `json:"liveness,omitempty"`
	// NextBoot says what an instance with another id booting now would do.
	NextBoot string     `json:"next_boot"`
	Mode     string     `json:"mode,omitempty"`
	Object   string     `json:"object,omitempty"`
	Holder   *holderDoc `json:"holder,omitempty"`
	// Ages and horizons, in seconds, judged on the storage's clock.
	HeartbeatAgeSeconds *float64 `json:"heartbeat_age_seconds,omitempty"`
	StaleAfterSeconds   *float64 `json:"stale_after_seconds"`
	StaleInSeconds      *float64 `json:"stale_in_seconds,omitempty"`
	Version             string   `json:"version,omitempty"`
	// Unreadable says why a present lock could not be read.
	Unreadable string `json:"unreadable,omitempty"`
	// Epoch is what the next acquisition counts on from: it takes a
	// higher one (lockadmin.Status.Epoch).
	Epoch uint64 `json:"epoch"`
	// ReleasedBy is who released the lock object that nobody holds now
	// (compare-and-swap mode keeps it: docs/adr/0066); "(lock break)"
	// after a break.
	ReleasedBy *holderDoc `json:"released_by,omitempty"`
	// Contenders are the other claims in sight (claims mode): acquisitions
	// in progress, held claims no live process trusts, objects the lock
	// did not write.
	Contenders []contenderDoc `json:"contenders,omitempty"`
	// Rekey is set when a rekey was interrupted: its lock may be the one
	// shown, and the same command finishes it.
	Rekey *interruptedDoc `json:"rekey_interrupted,omitempty"`
}

type contenderDoc struct {
	Object     string     `json:"object"`
	State      string     `json:"state,omitempty"`
	Holder     *holderDoc `json:"holder,omitempty"`
	Unreadable string     `json:"unreadable,omitempty"`
	AgeSeconds *float64   `json:"age_seconds"`
	Live       bool       `json:"live"`
}

// runLockStatus shows the lock, judged as the lock itself would: live,
// stale, dead (a SIGKILLed holder on this host), unreadable; and what the
// next boot would do. It exits 0 whether or not the lock is held; without
// an identity (or with the wrong one) it still tells whether a lock is
// present.
func runLockStatus(ctx context.Context, a *app, args []string) error {
	fs := a.flags("lock status")
	if _, err := a.parse(fs, args, 0, 0); err != nil {
		return err
	}
	st, err := a.openStore(ctx, false)
	if err != nil {
		return err
	}
	s, err := lockadmin.Inspect(ctx, st, lockadmin.InspectOptions{StaleAfter: a.staleAfter})
	if err != nil {
		return fmt.Errorf("lock status: %w", err)
	}
	interrupted := a.interruptedRekey(ctx, st)
	if a.json {
		doc := lockStatusDoc{Present: s.Present, Readable: s.Readable, Stale: s.Stale, Liveness: string(s.Liveness),
			NextBoot: s.NextBoot, Mode: string(s.Mode), Object: s.Object,
			StaleAfterSeconds: seconds(s.StaleAfter), Version: s.Version, Unreadable: s.Unreadable, Epoch: s.Epoch,
			Rekey: interruptedOf(interrupted)}
		if s.Present {
			doc.HeartbeatAgeSeconds = seconds(s.HeartbeatAge)
			doc.StaleInSeconds = seconds(s.StaleIn)
		}
		if s.Readable {
			h := holderOf(s.Record)
			if s.Present {
				doc.Holder = &h
			} else {
				doc.ReleasedBy = &h
			}
		}
		for _, c := range s.Contenders {
			cd := contenderDoc{Object: c.Object, State: c.State, Unreadable: c.Unreadable, AgeSeconds: seconds(c.Age), Live: c.Live}
			if c.Readable {
				h := holderOf(c.Record)
				cd.Holder = &h
			}
			doc.Contenders = append(doc.Contenders, cd)
		}
		a.emit(doc)
		return nil
	}
	switch {
	case !s.Present:
		a.printf("lock: not held\n")
	case !s.Readable:
		a.printf("lock: present but unreadable (%s): %s\n", s.Liveness, s.Unreadable)
		a.printf("  mode:       %s (%s)\n", s.Mode, s.Object)
		if s.Stale {
			a.printf("  last written %s ago, stale after %s\n", ago(s.HeartbeatAge), s.StaleAfter)
		} else {
			a.printf("  last written %s ago, stale after %s (in %s): it may belong to a live instance whose key is not configured here\n", ago(s.HeartbeatAge), s.StaleAfter, ago(s.StaleIn))
			a.printf("  pass the identity it is sealed to (--identity FILE) to see its holder; if its holder is gone for good: cairn-state lock break --force\n")
		}
	default:
		r := s.Record
		a.printf("lock: held by %q (%s)\n", r.InstanceID, s.Liveness)
		a.printf("  host:       %s, pid %d, process started %s\n", shown(r.Hostname), r.PID, timestamp(r.ProcessStart))
		a.printf("  mode:       %s, epoch %d\n", s.Mode, r.Epoch)
		a.printf("  acquired:   %s\n", timestamp(r.AcquiredAt))
		a.printf("  heartbeat:  %s ago (%s)\n", ago(s.HeartbeatAge), timestamp(r.Heartbeat))
		if s.Stale {
			a.printf("  stale:      yes, stale after %s\n", s.StaleAfter)
		} else {
			a.printf("  stale:      after %s (in %s)\n", s.StaleAfter, ago(s.StaleIn))
		}
	}
	for _, c := range s.Contenders {
		who := c.Unreadable
		if c.Readable {
			who = fmt.Sprintf("%q (pid %d on %s)", c.Record.InstanceID, c.Record.PID, c.Record.Hostname)
		}
		live := "not live"
		if c.Live {
			live = "live"
		}
		state := c.State
		if state == "" {
			state = "unknown object"
		}
		a.printf("  contender:  %s %s, %s ago, %s (%s)\n", state, who, ago(c.Age), live, c.Object)
	}
	if s.Present {
		a.printf("next boot:    %s\n", s.NextBoot)
	}
	if interrupted != nil {
		a.printf("rekey:        %s\n", rekeyNote(interrupted))
	}
	return nil
}

type lockBreakDoc struct {
	// Removed is the record removed; zero for an unreadable lock.
	Removed    holderDoc `json:"removed"`
	Unreadable bool      `json:"unreadable"`
	Forced     bool      `json:"forced"`
}

// runLockBreak removes a lock that a boot would take over at once (stale on
// two clocks, or its holder dead on this host), or a live one with --force and the
// --holder that matches its instance id, or a live one this run cannot read
// with --force alone (no holder can be matched). A refusal exits 3, naming
// the holder or saying the lock could not be read.
func runLockBreak(ctx context.Context, a *app, args []string) error {
	fs := a.flags("lock break")
	holder := fs.String("holder", "", "the instance `ID` that holds the lock, as lock status shows it; with --force, a live lock is removed only if it is still this holder's")
	force := fs.Bool("force", false, "remove a lock that a boot would not take over now (live, or old only on the storage's clock): with --holder for a readable lock, alone for one this run cannot read. Its holder keeps writing until its next heartbeat sees the break, at most until its lease ends (1.25 heartbeat intervals, 75s by default): on storage with conditional writes none of those writes lands over the next holder's, on Garage one can")
	if _, err := a.parse(fs, args, 0, 0); err != nil {
		return err
	}
	st, err := a.openStore(ctx, false)
	if err != nil {
		return err
	}
	r, err := lockadmin.Break(ctx, st, lockadmin.BreakOptions{Holder: *holder, Force: *force, StaleAfter: a.staleAfter, Logger: a.logger})
	var held *lock.HeldError
	switch {
	case err != nil && !*force && errors.As(err, &held) && held.Unreadable != "" && len(a.identities) == 0:
		// The lock object is sealed, released or held: without a key
		// of the store this run cannot tell which (docs/adr/0066).
		return &wordedError{msg: fmt.Sprintf("lock break: the lock cannot be read without an identity of the store (--identity or CAIRN_STATE_IDENTITY): it may be released, or may belong to a live instance (stale in %s); run it again with an identity, or if its holder is gone for good: cairn-state lock break --force --identity FILE", ago(held.StaleIn)), err: err}
	case err != nil && !*force && errors.As(err, &held) && held.Unreadable != "":
		return &wordedError{msg: fmt.Sprintf("lock break: the lock is not stale (stale in %s) and cannot be read with the configured identities: --force is missing; if its holder is gone for good: cairn-state lock break --force", ago(held.StaleIn)), err: err}
	case err != nil && !*force && errors.As(err, &held):
		h := held.Holder
		missing := "--force is missing"
		if *holder == "" {
			missing = "--force and --holder are missing"
		}
		return &wordedError{msg: fmt.Sprintf("lock break: the lock is live, held by %q (pid %d on %s, last heartbeat %s ago, stale in %s): %s; if its holder is gone for good: cairn-state lock break --force --holder %s",
			h.InstanceID, h.PID, shown(h.Hostname), ago(held.HeartbeatAge), ago(held.StaleIn), missing, shellQuote(h.InstanceID)), err: err}
	case err != nil:
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
