package lock

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cairnhq/state/internal/lockhook"
)

// Mode is how the lock is enforced, chosen from the backend's capabilities.
type Mode string

const (
	// ModeCAS: the lock is one object, written with compare-and-swap
	// (create if absent, replace or delete if the version matches), so two
	// acquirers can never both win. Used where the storage enforces put and
	// delete conditions (docs/adr/0019).
	ModeCAS Mode = "compare-and-swap"
	// ModeClaims: the storage has no (or only partial) conditional writes
	// (Garage), so every acquisition writes a claim of its own and then
	// lists the others' (docs/adr/0020). Safe when a listing shows every
	// write that completed before it began.
	ModeClaims Mode = "claims"
)

// Record states, in Record.State.
const (
	stateIntent   = lockhook.StateIntent
	stateHeld     = lockhook.StateHeld
	stateReleased = lockhook.StateReleased
)

// Record is what a lock object (or a claim) holds: who holds the lock and
// since when. It is stored as JSON inside the sealed object. Times are the
// holder's local clock; staleness is judged on the storage's clock from the
// object's modification time, with the holder's heartbeat field only as a
// cross-check (docs/adr/0019).
type Record struct {
	// InstanceID names the holder; by default its hostname.
	InstanceID string `json:"instance_id"`
	// Hostname is the holder's host name.
	Hostname string `json:"hostname"`
	// PID is the holder's process id, meaningful in ProcessScope only.
	PID int `json:"pid"`
	// ProcessStartTicks is when the holder's process started, in clock
	// ticks since boot (Linux: /proc/<pid>/stat field 22); zero where the
	// platform does not tell. It tells a live holder from an unrelated
	// process that reused its PID, and does not move with the wall clock.
	ProcessStartTicks uint64 `json:"process_start_ticks,omitempty"`
	// ProcessStart is the same start as a wall-clock time, for display.
	ProcessStart time.Time `json:"process_start,omitzero"`
	// ProcessScope identifies the PID space the PID belongs to (Linux: the
	// kernel boot id and the PID namespace). The PID is probed only by an
	// acquirer in the same scope; empty where unknown.
	ProcessScope string `json:"process_scope,omitempty"`
	// AcquiredAt is when this acquisition was made.
	AcquiredAt time.Time `json:"acquired_at"`
	// Heartbeat is when the holder last refreshed the lock.
	Heartbeat time.Time `json:"heartbeat"`
	// Epoch is the fencing epoch: it grows at every acquisition whose
	// fence opened, across releases, breaks and takeovers (by one, or to
	// a new block's first epoch; docs/adr/0019, 0066). In a released
	// record, the epoch the next acquisition counts on from. At least 1;
	// zero only in an intent claim.
	Epoch uint64 `json:"epoch"`
	// Ceiling is the highest epoch of the block the lock object's epoch
	// lies in, whose reservation marker exists (compare-and-swap mode,
	// docs/adr/0066): the next acquisition counts on from Epoch while it
	// stays at or below Ceiling, else it reserves the next block first.
	// Zero in claims, and where it is unknown: the next acquisition then
	// counts on from the markers.
	Ceiling uint64 `json:"epoch_ceiling,omitempty"`
	// Root marks a lock object written by an acquisition that found none
	// (a new store, or one deleted out of band) and has not written it
	// again since: its epoch was counted from the markers, and until its
	// writer's second look confirms no later reservation, nobody counts on
	// from it but from the markers (docs/adr/0066).
	Root bool `json:"root,omitempty"`
	// Mode is how the holder enforces the lock.
	Mode Mode `json:"mode"`
	// State is "held" for the lock object and confirmed claims, "intent"
	// for a claim of an acquisition in progress, "released" for a lock
	// object nobody holds (docs/adr/0066). Empty means held.
	State string `json:"state,omitempty"`
	// StaleAfter is the holder's stale window; others judge the lock
	// stale only after the longer of their own window and this one.
	StaleAfter time.Duration `json:"stale_after_ns,omitempty"`
	// HeartbeatInterval is how often the holder refreshes the lock, so
	// that others can tell a missed heartbeat; zero in older records.
	HeartbeatInterval time.Duration `json:"heartbeat_ns,omitempty"`
	// AcquisitionID is random per acquisition attempt. A writer that finds
	// its own acquisition id on the store holds the lock, even if the
	// answer to its write was lost; a claim's name carries it too.
	AcquisitionID string `json:"acquisition_id"`
}

// errMalformed marks a lock object that opened but is not a lock record.
var errMalformed = errors.New("not a lock record")

func (r Record) encode() ([]byte, error) { return json.Marshal(r) }

// held reports whether the record is a held lock (the lock object, a
// confirmed claim) rather than an intent or a released lock object.
func (r Record) held() bool { return r.State == "" || r.State == stateHeld }

// released reports whether the record is a released lock object.
func (r Record) released() bool { return r.State == stateReleased }

// counted reports whether the next epoch may be counted on from the
// record: a readable lock object, not a root, whose ceiling covers its
// epoch (docs/adr/0066).
func (r Record) counted() bool { return !r.Root && r.Ceiling >= r.Epoch }

// decodeRecord parses an opened lock object or claim: the one parser behind
// Acquire, inspect, brk, the heartbeat and Release. Anything but a JSON
// object naming an instance and an acquisition, in a known state, at an
// epoch of at least 1 (zero for an intent) is an error wrapping
// errMalformed, which the lock judges as an unreadable lock. Unknown fields
// and modes are accepted, so that a lock written by a newer version is
// still honoured.
func decodeRecord(data []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return Record{}, fmt.Errorf("%w: %w", errMalformed, err)
	}
	if r.InstanceID == "" || r.AcquisitionID == "" {
		return Record{}, fmt.Errorf("%w: instance_id or acquisition_id missing", errMalformed)
	}
	switch r.State {
	case "", stateHeld, stateReleased:
		if r.Epoch == 0 {
			// Every held lock has an epoch of at least 1; counting on from
			// 0 would repeat an epoch.
			return Record{}, fmt.Errorf("%w: epoch missing or zero", errMalformed)
		}
	case stateIntent:
	default:
		return Record{}, fmt.Errorf("%w: unknown state %q", errMalformed, r.State)
	}
	if r.StaleAfter < 0 || r.HeartbeatInterval < 0 {
		return Record{}, fmt.Errorf("%w: negative stale window or heartbeat interval", errMalformed)
	}
	return r, nil
}

// markerRecord is what an epoch marker holds; the number that counts is in
// its name, which an acquirer reads even when it cannot open the object.
type markerRecord struct {
	Epoch         uint64    `json:"epoch"`
	InstanceID    string    `json:"instance_id"`
	AcquisitionID string    `json:"acquisition_id"`
	WrittenAt     time.Time `json:"written_at"`
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
