package lock

import (
	"fmt"
	"time"
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
	label   Liveness // what the record's holder is judged to be
	reason  string   // why it may be taken over (vTake)
	warn    bool     // log the takeover as a warning (unreadable lock)
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

// judge applies the rules of docs/adr/0019 to a record found on the store
// that is not ours: the lock object, or another acquisition's held claim.
// e must have been read.
func (a *acquirer) judge(e *entry, now time.Time) verdict {
	unchanged, changes := a.seen.observe(e, now)
	if !e.readable {
		return a.judgeUnreadable(e, unchanged)
	}
	rec := e.rec
	window := max(a.o.StaleAfter, rec.StaleAfter)
	hb := rec.HeartbeatInterval
	if hb <= 0 {
		hb = a.o.HeartbeatInterval
	}
	held := a.heldError(e, window, unchanged)
	refuse := verdict{kind: vRefuse, label: Live, held: held, recheck: a.o.poll(min(hb, max(held.StaleIn, time.Millisecond)))}
	who := fmt.Sprintf("%q (pid %d on %s)", rec.InstanceID, rec.PID, rec.Hostname)

	// Stale: watched unchanged for the whole window on our own clock, or
	// old on the storage's clock and confirmed by a second clock.
	if unchanged >= window {
		return verdict{kind: vTake, label: Stale, reason: fmt.Sprintf("it was stale: %s has not refreshed it for %s of watching, stale after %s", who, roundAge(unchanged), window)}
	}
	if !e.anomaly && e.age >= window {
		ownClockAge := now.Round(0).Sub(rec.Heartbeat)
		switch {
		case ownClockAge >= window-hb:
			return verdict{kind: vTake, label: Stale, reason: fmt.Sprintf("it was stale: %s last refreshed it %s ago, stale after %s", who, roundAge(e.age), window)}
		case unchanged >= a.o.missedHeartbeat(hb):
			return verdict{kind: vTake, label: Stale, reason: fmt.Sprintf("it was stale: %s last refreshed it %s ago on the storage's clock and did not refresh it for %s of watching", who, roundAge(e.age), roundAge(unchanged))}
		}
		// Old on the storage's clock, young by its own heartbeat: a
		// forward step of the storage clock, or skewed clocks. Watch it
		// for one heartbeat: a live holder refreshes it, and one that was
		// refreshed while we watched is live.
		if changes == 0 {
			return verdict{kind: vWatch, label: Watching, held: held, recheck: a.o.poll(hb)}
		}
	}

	switch l := probeHolder(a.self, a.hostname, rec); l {
	case dead, reused:
		return verdict{kind: vTake, label: Dead, reason: fmt.Sprintf("its holder %s is gone (%s)", who, l)}
	case alive:
		held.Duplicate = rec.InstanceID == a.o.InstanceID
		if held.Duplicate {
			refuse.label = Duplicate
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
		refuse.label = Duplicate
		return refuse
	}
	if unchanged >= a.o.missedHeartbeat(hb) {
		return verdict{kind: vTake, label: MissedHeartbeat, reason: fmt.Sprintf("it was held by this instance id (%s) and missed a heartbeat: not refreshed for %s of watching, heartbeat every %s", who, roundAge(unchanged), hb)}
	}
	return verdict{kind: vWatch, label: Watching, held: heldAsDuplicate(held), recheck: a.o.poll(hb)}
}

// heldAsDuplicate marks a refusal as a duplicate (what the refusal will be
// if the record keeps being refreshed).
func heldAsDuplicate(h *HeldError) *HeldError {
	d := *h
	d.Duplicate = true
	return &d
}

// judgeUnreadable judges a record that does not open (another key,
// garbage, a corrupt object file) by its age alone: refused while fresh,
// taken over with a warning once stale; "stale" on the storage's clock
// needs one heartbeat of watching too, since no heartbeat field can
// confirm it.
func (a *acquirer) judgeUnreadable(e *entry, unchanged time.Duration) verdict {
	window := a.o.StaleAfter
	held := a.heldError(e, window, unchanged)
	why := "unreadable"
	if e.why != nil {
		why = e.why.Error()
	}
	switch {
	case unchanged >= window:
		return verdict{kind: vTake, label: UnreadableStale, warn: true, reason: fmt.Sprintf("%s is unreadable (%s) and was not rewritten for %s of watching, stale after %s", e.name, why, roundAge(unchanged), window)}
	case !e.anomaly && e.age >= window && unchanged >= a.o.missedHeartbeat(0):
		return verdict{kind: vTake, label: UnreadableStale, warn: true, reason: fmt.Sprintf("%s is unreadable (%s) and stale: last written %s ago, stale after %s", e.name, why, roundAge(e.age), window)}
	case !e.anomaly && e.age >= window:
		return verdict{kind: vWatch, label: Watching, held: held, recheck: a.o.poll(0)}
	}
	return verdict{kind: vRefuse, label: Unreadable, held: held, recheck: a.o.poll(min(a.o.HeartbeatInterval, max(held.StaleIn, time.Millisecond)))}
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

// Liveness is how the lock's rules judge a holder, for operators
// ([Inspect]).
type Liveness string

// The judgements of a holder.
const (
	// Live: refreshed within the stale window by a holder that is (or may
	// be) running; a boot with another instance id is refused.
	Live Liveness = "live"
	// Duplicate: live, with the judge's own instance id.
	Duplicate Liveness = "duplicate"
	// Stale: not refreshed for the stale window; taken over.
	Stale Liveness = "stale"
	// Dead: its holder ran on this host and is gone (or its PID now
	// belongs to another process); taken over at once.
	Dead Liveness = "dead"
	// MissedHeartbeat: our instance id from a PID space we cannot probe,
	// and not refreshed for one heartbeat and a half of watching; taken
	// over.
	MissedHeartbeat Liveness = "missed heartbeat"
	// Unreadable: it does not open with this process's keys and is not
	// stale yet; refused.
	Unreadable Liveness = "unreadable"
	// UnreadableStale: it does not open and is stale; taken over with a
	// warning.
	UnreadableStale Liveness = "unreadable, stale"
	// Watching: not decided yet; the lock watches it for a heartbeat
	// (storage clock and holder's clock disagree, or our instance id from
	// a PID space we cannot probe).
	Watching Liveness = "watching"
)
