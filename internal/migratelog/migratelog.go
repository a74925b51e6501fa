// Package migratelog is the migration log's format and its reading, for
// package migrate, which writes it, and for cairn-state's own packages
// (`cairn-state migrate status`, the tests), which read it: one sealed JSON
// object under the reserved state name ".migrations" (docs/adr/0010,
// 0033). An application runs its migrations and never reads the log
// (docs/adr/0062).
package migratelog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/storemeta"
	"github.com/cairnhq/state/store"
)

// Name is the reserved state name of the migration log.
const Name = storemeta.MigrationLogName

// Version is the format version of the log object; see ADR 0010.
const Version = 1

// State is where a migration stands.
type State string

const (
	// StatePending means the step has never started, or an operator
	// called MarkPending after it was interrupted.
	StatePending State = "pending"
	// StateStarted means the step was recorded as started and never
	// recorded as finished: its process died (or lost the lock) while Up
	// ran.
	StateStarted State = "started"
	// StateFailed means Up returned an error.
	StateFailed State = "failed"
	// StateApplied means Up returned nil (or an operator called
	// MarkApplied).
	StateApplied State = "applied"
)

// Record is one migration's entry in the log.
type Record struct {
	ID          string `json:"id"`
	Description string `json:"description,omitempty"`
	State       State  `json:"state"`
	// NonRepeatable is copied from the Migration when it last started.
	NonRepeatable bool `json:"non_repeatable,omitempty"`
	// Attempts counts the times Up was started.
	Attempts int `json:"attempts"`
	// StartedAt and FinishedAt are on the local clock of the instance that
	// ran the step; they are for people, nothing compares them.
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// InstanceID and Epoch identify the lock holder that last ran the step.
	InstanceID string `json:"instance_id,omitempty"`
	Epoch      uint64 `json:"epoch,omitempty"`
	// Error is the error Up last returned (StateFailed).
	Error string `json:"error,omitempty"`
	// Note is set by MarkApplied and MarkPending.
	Note string `json:"note,omitempty"`
}

// Log is the JSON document stored, sealed, under Name.
type Log struct {
	Version int      `json:"version"`
	Records []Record `json:"records"`
}

// Find returns the record of id, or nil.
func (lg *Log) Find(id string) *Record {
	for i := range lg.Records {
		if lg.Records[i].ID == id {
			return &lg.Records[i]
		}
	}
	return nil
}

// Upsert returns the record for id, appending an empty one if needed.
func (lg *Log) Upsert(id string) *Record {
	if r := lg.Find(id); r != nil {
		return r
	}
	lg.Records = append(lg.Records, Record{ID: id})
	return &lg.Records[len(lg.Records)-1]
}

// Decode parses a log of this Version.
func Decode(data []byte) (*Log, error) {
	var lg Log
	if err := json.Unmarshal(data, &lg); err != nil {
		return nil, fmt.Errorf("migration log %s: %w", Name, err)
	}
	if lg.Version != Version {
		return nil, fmt.Errorf("migration log %s: format version %d, this code reads version %d", Name, lg.Version, Version)
	}
	return &lg, nil
}

// ErrMissing is migrate.ErrLogMissing (the same value): the log does not
// exist although the store's manifest records that it did.
var ErrMissing = errors.New("the migration log is missing, but the store's manifest says it exists")

// Read reads the log of st; an absent log is an empty one, unless the
// store's manifest says it exists (ErrMissing, naming the log). exists
// reports whether it was there.
func Read(ctx context.Context, st *store.Store) (lg *Log, exists bool, err error) {
	data, _, err := storeadmin.Internal(st).Get(ctx, Name)
	if errors.Is(err, backend.ErrNotFound) {
		if m, ok := storeadmin.Manifest(st); ok && m.MigrationLog {
			key, _ := storeadmin.Key(storeadmin.Internal(st), Name)
			return nil, false, fmt.Errorf("migrations: %w: %s is gone, but the manifest of store %s (generation %d) records it; "+
				"restore it from a backup (no migration was run again)", ErrMissing, key, m.ID, m.Generation)
		}
		return &Log{Version: Version}, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading migration log: %w", err)
	}
	lg, err = Decode(data)
	return lg, err == nil, err
}

// Applied returns every record of the migration log of st in the order the
// steps first started, whatever their state (see Record.State). It needs
// no lock and no list of migrations: it is what `cairn-state migrate
// status` shows. An absent log gives an empty slice.
func Applied(ctx context.Context, st *store.Store) ([]Record, error) {
	lg, _, err := Read(ctx, st)
	if err != nil {
		return nil, err
	}
	return lg.Records, nil
}
