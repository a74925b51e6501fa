package main

import (
	"context"
	"fmt"

	"github.com/cairnhq/state/internal/lockadmin"
)

// lockFacts are the lock line's: the lock as the lock's rules judge it.
type lockFacts struct {
	LockMode            string     `json:"lock_mode,omitempty"`
	Object              string     `json:"object,omitempty"`
	Present             *bool      `json:"present,omitempty"`
	Liveness            string     `json:"liveness,omitempty"`
	Holder              *holderDoc `json:"holder,omitempty"`
	HeartbeatAgeSeconds *float64   `json:"heartbeat_age_seconds,omitempty"`
	StaleInSeconds      *float64   `json:"stale_in_seconds,omitempty"`
	Epoch               *uint64    `json:"epoch,omitempty"`
	NextBoot            string     `json:"next_boot,omitempty"`
	Contenders          int        `json:"contenders,omitempty"`
}

// checkLock shows the lock holder as the lock's rules judge it.
func (d *doctor) checkLock(ctx context.Context) {
	st := d.storeFor(ctx, checkLock) // keyless, the lock is seen, not read
	if st == nil {
		return
	}
	s, err := lockadmin.Inspect(ctx, st, lockadmin.InspectOptions{StaleAfter: d.a.staleAfter})
	if err != nil {
		d.storageError(checkLock, "reading the lock", err)
		return
	}
	f := &lockFacts{Present: &s.Present, Liveness: string(s.Liveness), NextBoot: s.NextBoot, Epoch: &s.Epoch,
		LockMode: string(s.Mode), Object: s.Object, Contenders: len(s.Contenders)}
	if s.Present {
		f.HeartbeatAgeSeconds, f.StaleInSeconds = seconds(s.HeartbeatAge), seconds(s.StaleIn)
	}
	if s.Present && s.Readable {
		h := holderOf(s.Record)
		f.Holder = &h
	}
	live := 0
	for _, c := range s.Contenders {
		if c.Live && c.State == lockadmin.StateHeld {
			live++
		}
	}
	status, finding, hint := statusOK, "", ""
	switch {
	case !s.Present:
		finding = fmt.Sprintf("not held; the next acquisition takes it at once, at epoch %d", s.Epoch+1)
	case !s.Readable && !d.keysOK:
		finding = fmt.Sprintf("present (%s, last written %s ago, stale after %s); its holder cannot be read without a usable identity", s.Liveness, ago(s.HeartbeatAge), s.StaleAfter)
		if s.Stale {
			status, hint = statusWarn, "the next boot takes it over with a warning; pass --identity FILE to see who held it"
		}
	case !s.Readable:
		status = statusWarn
		finding = fmt.Sprintf("present but it does not open with the configured identities (%s, last written %s ago, stale after %s): %s", s.Liveness, ago(s.HeartbeatAge), s.StaleAfter, s.Unreadable)
		hint = "an instance with another key is using this store, or the lock is damaged: the next boot would " + s.NextBoot + "; cairn-state lock break --force removes it once its holder is gone for good"
	default:
		r := s.Record
		who := fmt.Sprintf("%q (pid %d on %s)", r.InstanceID, r.PID, r.Hostname)
		finding = fmt.Sprintf("held by %s, %s, heartbeat %s ago, mode %s, epoch %d", who, s.Liveness, ago(s.HeartbeatAge), s.Mode, r.Epoch)
		switch s.Liveness {
		case lockadmin.Live:
			hint = "writes from here (put, rm, rekey) wait for it (--wait) or are refused with exit 3; reads work"
		case lockadmin.Dead:
			status = statusWarn
			hint = "its process is gone from this host: the next boot or write takes it over at once"
		default:
			status = statusWarn
			hint = "the next boot would " + s.NextBoot + "; cairn-state lock break removes a stale lock"
		}
		if d.lockMode != "" && s.Mode != d.lockMode {
			status = statusWarn
			hint = fmt.Sprintf("its holder uses the %s protocol but the store's lock mode is %s: is it a version of the application from before the store recorded its mode? ", s.Mode, d.lockMode) + hint
		}
	}
	if live > 0 {
		status = statusWarn
		finding += fmt.Sprintf("; %s also held and live", plural(live, "other claim"))
		hint = "two instances may share one instance id, or the storage's listings are not consistent (Garage: consistency_mode); cairn-state lock status lists them"
	}
	d.add(checkLock, status, finding, hint, f)
}
