package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"time"

	"golang.org/x/term"

	"github.com/cairnhq/state/lock"
)

// emit writes v as the one JSON document of this run.
func (a *app) emit(v any) {
	if a.emitted {
		panic("cairn-state: second JSON document")
	}
	a.emitted = true
	enc := json.NewEncoder(a.out)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(a.err, "cairn-state: writing JSON: %v\n", err)
	}
}

// printf writes human output to stdout (never used with --json).
func (a *app) printf(format string, args ...any) {
	fmt.Fprintf(a.out, format, args...)
}

// isTerminal reports whether w (a writer or reader) is a terminal.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// errorDoc is the JSON document of a failed run.
type errorDoc struct {
	Error errorBody `json:"error"`
}

type errorBody struct {
	Message  string `json:"message"`
	ExitCode int    `json:"exit_code"`
	// Set when the lock is held by a live foreign instance (exit code 3).
	Holder              *holderDoc `json:"holder,omitempty"`
	HeartbeatAgeSeconds *float64   `json:"heartbeat_age_seconds,omitempty"`
	StaleInSeconds      *float64   `json:"stale_in_seconds,omitempty"`
	// Set instead of Holder when the lock refused is one this run could not
	// read (exit code 3): why it could not be read.
	Unreadable string `json:"unreadable,omitempty"`
	// Set when the identity does not belong to the store (exit code 5):
	// what anyone can read of it without the key.
	Store *notMemberDoc `json:"store,omitempty"`
}

// notMemberDoc describes the store an identity was refused from.
type notMemberDoc struct {
	StoreID    string    `json:"store_id,omitempty"`
	Created    time.Time `json:"created,omitzero"`
	Recipients int       `json:"recipients,omitempty"`
	Key        string    `json:"object"`
}

// holderDoc is a lock record in JSON output.
type holderDoc struct {
	InstanceID   string    `json:"instance_id"`
	Hostname     string    `json:"hostname"`
	PID          int       `json:"pid"`
	ProcessStart time.Time `json:"process_start,omitzero"`
	AcquiredAt   time.Time `json:"acquired_at,omitzero"`
	Heartbeat    time.Time `json:"heartbeat,omitzero"`
	Epoch        uint64    `json:"epoch"`
	Mode         string    `json:"mode"`
}

func holderOf(r lock.Record) holderDoc {
	return holderDoc{
		InstanceID:   r.InstanceID,
		Hostname:     r.Hostname,
		PID:          r.PID,
		ProcessStart: r.ProcessStart,
		AcquiredAt:   r.AcquiredAt,
		Heartbeat:    r.Heartbeat,
		Epoch:        r.Epoch,
		Mode:         string(r.Mode),
	}
}

// seconds is d in seconds, rounded to milliseconds, for JSON.
func seconds(d time.Duration) *float64 {
	s := math.Round(d.Seconds()*1000) / 1000
	return &s
}

// ago formats a duration for humans: whole seconds, or milliseconds below one.
func ago(d time.Duration) string {
	if d < time.Second && d > -time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// timestamp formats a time for humans.
func timestamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// plural is "1 object", "2 objects".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
