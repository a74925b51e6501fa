package lock

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Name is the reserved state name of the lock object: the store keeps it at
// <root>/.cairn-state/.lock, sealed like every other object.
const Name = ".lock"

// Mode is how the lock is enforced, chosen from the backend's capabilities.
type Mode string

const (
	// ModeCAS: acquisition, heartbeat and release are compare-and-swap
	// writes (create if absent, replace or delete if the version matches),
	// so two acquirers can never both win.
	ModeCAS Mode = "compare-and-swap"
	// ModeAdvisory: the backend has no conditional writes (Garage), so
	// acquisition is read, write, then read back after a settle delay. It
	// catches a second instance started against the same store; it is not
	// consensus, and two instances racing within about a second can both
	// believe they hold the lock until the next heartbeat.
	ModeAdvisory Mode = "advisory"
)

// Record is what the lock object holds: who holds the lock and since when.
// It is stored as JSON inside the sealed object. Times are the holder's
// local clock and informational; staleness is judged on the storage's
// clock from the object's modification time, never from these fields.
type Record struct {
	// InstanceID names the holder; by default its hostname, so that a
	// crash-restarted container (same hostname) takes its lock back at once.
	InstanceID string `json:"instance_id"`
	// Hostname is the holder's host name.
	Hostname string `json:"hostname"`
	// PID is the holder's process id, meaningful on Hostname only.
	PID int `json:"pid"`
	// ProcessStart is when the holder's process started (Linux: from
	// /proc/<pid>/stat); zero where the platform does not tell. It tells a
	// live holder from an unrelated process that reused its PID.
	ProcessStart time.Time `json:"process_start,omitzero"`
	// ProcessScope identifies the PID space the PID belongs to (Linux: the
	// kernel boot id and the PID namespace). The PID is probed only by an
	// acquirer in the same scope; empty where unknown.
	ProcessScope string `json:"process_scope,omitempty"`
	// AcquiredAt is when this acquisition was made.
	AcquiredAt time.Time `json:"acquired_at"`
	// Heartbeat is when the holder last refreshed the lock.
	Heartbeat time.Time `json:"heartbeat"`
	// Epoch is the fencing epoch: it grows by one at every acquisition,
	// whether it replaces a previous record (takeover, reacquire) or finds
	// the lock released or broken, whose epoch was saved in [EpochName].
	// It is at least 1. Only an unreadable lock object with no readable
	// saved epoch (a store whose every copy of it was lost or re-keyed
	// away) lets it start again at 1.
	Epoch uint64 `json:"epoch"`
	// Mode is how the holder enforces the lock.
	Mode Mode `json:"mode"`
	// StaleAfter is the holder's own stale window (Options.StaleAfter),
	// in nanoseconds in the JSON; zero in records written before it was
	// recorded. Acquire, Inspect and Break judge the lock stale only after
	// the longer of their own window and this one, so that an acquirer
	// configured with a short window never takes over a holder that
	// heartbeats for a long one.
	StaleAfter time.Duration `json:"stale_after_ns,omitempty"`
	// AcquisitionID is random per acquisition. A writer that finds its own
	// acquisition id on the store holds the lock, even if the answer to its
	// write was lost and a retry reported a conflict.
	AcquisitionID string `json:"acquisition_id"`
}

// errMalformed marks a lock object that opened but is not a lock record.
var errMalformed = errors.New("not a lock record")

func (r Record) encode() ([]byte, error) {
	return json.Marshal(r)
}

// decodeRecord parses an opened lock object: the one parser behind
// Acquire, Inspect, Break, the heartbeat and Release. Anything but a JSON
// object naming an instance and an acquisition at an epoch of at least 1
// is an error wrapping errMalformed, which the lock reports as an
// unreadable lock. Unknown fields and modes are accepted, so that a lock
// written by a newer version is still honoured.
func decodeRecord(data []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return Record{}, fmt.Errorf("%w: %w", errMalformed, err)
	}
	if r.InstanceID == "" || r.AcquisitionID == "" {
		return Record{}, fmt.Errorf("%w: instance_id or acquisition_id missing", errMalformed)
	}
	if r.Epoch == 0 {
		// Every acquisition writes an epoch of at least 1; counting on
		// from 0 would repeat an epoch.
		return Record{}, fmt.Errorf("%w: epoch missing or zero", errMalformed)
	}
	return r, nil
}
