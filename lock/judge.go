package lock

import (
	"context"
	"fmt"
	"time"

	"github.com/cairnhq/state/internal/lockhook"
)

// verdictKind is what the rules say about one record.
type verdictKind int

const (
	// vRefuse: a live holder; refuse (or wait with WaitForStale).
	vRefuse verdictKind = iota
	// vTake: stale, dead, or a same-id record that missed a heartbeat:
	// take it over.
	vTake
	// vWatch: not decided yet; look again after recheck.
	vWatch
)

// verdict is the judgement of one record.
type verdict struct {
	kind    verdictKind
	label   lockhook.Liveness // what the record's holder is judged to be
	reason  string            // why it may be taken over (vTake)
	warn    bool              // log the takeover as a warning (unreadable lock)
	held    *HeldError
	recheck time.Duration // vWatch, and the refusal's polling interval
}

// sighting is what this process remembers of one object's version: when it
// first saw it (monotonic) and how many other versions it saw before.
type sighting struct {
	version string
	first   time.Time
	changes int
}

// watcher remembers versions across the looks of one acquisition.
type watcher map[string]*sighting

// observe notes the entry's current version and returns how long this
// version has been seen unchanged and how often it changed while watched.
func (w watcher) observe(e *entry, now time.Time) (unchanged time.Duration, changes int) {
	s := w[e.name]
	switch {
	case s == nil:
		w[e.name] = &sighting{version: e.info.Version, first: now}
		return 0, 0
	case s.version != e.info.Version:
		s.version, s.first = e.info.Version, now
		s.changes++
	}
	return now.Sub(s.first), s.changes
}

// judge applies the rules of docs/adr/0019 and 0028 to a record found on
// the store that is not ours: the lock object, or another acquisition's
// held claim. e must have been read.
//
// No takeover rests on one machine's clock (docs/adr/0028): a record is
// stale when this process watched it unchanged for the whole window on its
// own monotonic clock, or when it is older than the window both on the
// storage's clock and on a second, independent one — the holder's own
// heartbeat stamp read against this process's wall clock, which must agree
// with the holder's within the window's margin. When the two disagree (a
// storage clock stepped forward, a Garage node skewed), it is watched.
func (a *acquirer) judge(e *entry, now time.Time) verdict {
	unchanged, changes := a.seen.observe(e, now)
	if !e.readable {
		return a.judgeUnreadable(e, unchanged)
	}
	rec := e.rec
	window := a.window(e)
	hb := rec.HeartbeatInterval
	if hb <= 0 {
		hb = a.o.HeartbeatInterval
	}
	held := a.heldError(e, window, unchanged)
	refuse := verdict{kind: vRefuse, label: lockhook.Live, held: held, recheck: a.o.poll(min(hb, max(held.StaleIn, time.Millisecond)))}
	who := fmt.Sprintf("%q (pid %d on %s)", rec.InstanceID, rec.PID, rec.Hostname)

	// Stale: watched unchanged for the whole window on our own clock, or
	// old on the storage's clock and confirmed by a second clock.
	if unchanged >= window {
		return verdict{kind: vTake, label: lockhook.Stale, reason: fmt.Sprintf("it was stale: %s has not refreshed it for %s of watching, stale after %s", who, roundAge(unchanged), window)}
	}
	if !e.anomaly && e.age >= window {
		if now.Round(0).Sub(rec.Heartbeat) >= window {
			return verdict{kind: vTake, label: lockhook.Stale, reason: fmt.Sprintf("it was stale: %s last refreshed it %s ago, stale after %s", who, roundAge(e.age), window)}
		}
		// Old on the storage's clock, young by its own heartbeat: a
		// forward step of the storage clock, skewed storage nodes, or a
		// holder whose clock is ahead. Watch it: a live holder refreshes
		// it (then it is refused below), a dead one is taken over once
		// watched unchanged for the window. Watching for a heartbeat and a
		// half would throw out a live holder that is merely suspended
		// (lock/model -DOTHER_ID_MISSED_HB).
		if changes == 0 {
			return verdict{kind: vWatch, label: lockhook.Watching, held: held, recheck: a.o.poll(hb)}
		}
	}

	switch l := probeHolder(a.self, a.hostname, rec); l {
	case dead, reused:
		return verdict{kind: vTake, label: lockhook.Dead, reason: fmt.Sprintf("its holder %s is gone (%s)", who, l)}
	case alive:
		held.Duplicate = rec.InstanceID == a.o.InstanceID
		if held.Duplicate {
			refuse.label = lockhook.Duplicate
		}
		return refuse
	}
	if rec.InstanceID != a.o.InstanceID {
		return refuse
	}
	// Our instance id, from a PID space we cannot probe: a crash-restart
	// of ours (back within about one heartbeat) or a second live process
	// with our id. A live one refreshes its record while we watch. One
	// change alone may be the crashed process's last heartbeat, sent
	// before it died and landing late; a second one is a live process.
	// unchanged counts from the last change either way.
	if changes > 1 {
		held.Duplicate = true
		refuse.label = lockhook.Duplicate
		return refuse
	}
	if unchanged >= a.o.missedHeartbeat(hb) {
		return verdict{kind: vTake, label: lockhook.MissedHeartbeat, reason: fmt.Sprintf("it was held by this instance id (%s) and missed a heartbeat: not refreshed for %s of watching, heartbeat every %s", who, roundAge(unchanged), hb)}
	}
	return verdict{kind: vWatch, label: lockhook.Watching, held: heldAsDuplicate(held), recheck: a.o.poll(hb)}
}

// intentLive reports whether an intent claim of another acquisition still
// counts. It is dead once watched unchanged for the intent window on this
// process's clock, or once older than the window both on the storage's
// clock and on the second clock, its writer's stamp (read from its
// content, which is read only when the storage says old) against ours —
// never on the storage's clock alone (docs/adr/0028; lock/model
// -DINTENT_STORAGE_AGE).
func (a *acquirer) intentLive(ctx context.Context, e *entry, now time.Time) (bool, error) {
	unchanged, _ := a.seen.observe(e, now)
	if unchanged >= a.o.IntentWindow {
		return false, nil
	}
	if e.anomaly || e.age < a.o.IntentWindow {
		return true, nil
	}
	if !e.read {
		gone, err := a.scan.read(ctx, e)
		if err != nil {
			return false, err
		}
		if gone {
			// Deleted since the listing: its acquirer may have confirmed
			// after the listing read the held claims (lock/model
			// -DGET_404_IGNORED). Live: look again.
			return true, nil
		}
	}
	return !e.readable || now.Round(0).Sub(e.rec.Heartbeat) < a.o.IntentWindow, nil
}

// intentDead is intentLive without reading: dead only when what is already
// known says so (clean-up uses it).
func (a *acquirer) intentDead(e *entry, now time.Time) bool {
	unchanged, _ := a.seen.observe(e, now)
	return unchanged >= a.o.IntentWindow ||
		e.read && e.readable && !e.anomaly && e.age >= a.o.IntentWindow && now.Round(0).Sub(e.rec.Heartbeat) >= a.o.IntentWindow
}

// window is the stale window a record is judged by: the longer of ours and
// the one its holder recorded, which counts up to maxStaleAfter.
func (a *acquirer) window(e *entry) time.Duration {
	if e.readable {
		return max(a.o.StaleAfter, min(e.rec.StaleAfter, maxStaleAfter))
	}
	return a.o.StaleAfter
}

// heldAsDuplicate marks a refusal as a duplicate (what the refusal will be
// if the record keeps being refreshed).
func heldAsDuplicate(h *HeldError) *HeldError {
	d := *h
	d.Duplicate = true
	return &d
}

// judgeUnreadable judges a record that does not open (another key,
// garbage, a corrupt object file): refused while fresh on the storage's
// clock, watched once old there, and taken over with a warning once
// watched unchanged for the window — no heartbeat field can confirm the
// storage's clock, and a second clock is what a takeover needs.
func (a *acquirer) judgeUnreadable(e *entry, unchanged time.Duration) verdict {
	window := a.o.StaleAfter
	held := a.heldError(e, window, unchanged)
	why := "unreadable"
	if e.why != nil {
		why = e.why.Error()
	}
	switch {
	case unchanged >= window:
		return verdict{kind: vTake, label: lockhook.UnreadableStale, warn: true, reason: fmt.Sprintf("%s is unreadable (%s) and was not rewritten for %s of watching, stale after %s", e.name, why, roundAge(unchanged), window)}
	case !e.anomaly && e.age >= window:
		return verdict{kind: vWatch, label: lockhook.Watching, held: held, recheck: a.o.poll(0)}
	}
	return verdict{kind: vRefuse, label: lockhook.Unreadable, held: held, recheck: a.o.poll(min(a.o.HeartbeatInterval, max(held.StaleIn, time.Millisecond)))}
}

// heldError is the refusal of e, judged with window.
func (a *acquirer) heldError(e *entry, window, unchanged time.Duration) *HeldError {
	h := &HeldError{Object: e.name, StaleAfter: window, HeartbeatAge: e.age, ClockAnomaly: e.anomaly}
	if e.anomaly {
		h.StaleIn = max(window-unchanged, 0)
	} else {
		h.StaleIn = max(window-e.age, 0)
	}
	if e.readable {
		h.Holder = e.rec
	} else {
		h.Unreadable = "unreadable"
		if e.why != nil {
			h.Unreadable = e.why.Error()
		}
	}
	return h
}
