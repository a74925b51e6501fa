package migrate

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/cairnhq/state/internal/migratelog"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/store"
)

// logName is the reserved state name of the migration log.
const logName = migratelog.Name

// ErrLogMissing means the migration log does not exist although the
// store's manifest records that it did: it was deleted. Nothing is run
// again: every migration would, seed migrations resetting what they
// seeded. The error names the log.
var ErrLogMissing = migratelog.ErrMissing

// unknownApplied lists applied records of lg whose IDs are not in ms.
func unknownApplied(lg *migratelog.Log, ms []Migration) []string {
	var out []string
	for _, r := range lg.Records {
		if r.State == migratelog.StateApplied && !slices.ContainsFunc(ms, func(m Migration) bool { return m.ID == r.ID }) {
			out = append(out, r.ID)
		}
	}
	return out
}

// appliedAfter returns the first ID of rest that lg records as applied.
func appliedAfter(lg *migratelog.Log, rest []Migration) string {
	for _, m := range rest {
		if r := lg.Find(m.ID); r != nil && r.State == migratelog.StateApplied {
			return m.ID
		}
	}
	return ""
}

// recordLog makes the store's manifest say that the log exists (once: it
// does nothing when it says so already), through st fenced by the
// caller.
func recordLog(ctx context.Context, st *store.Store) error {
	if m, ok := storeadmin.Manifest(st); !ok || m.MigrationLog {
		return nil
	}
	return storeadmin.RecordMigrationLog(ctx, st)
}

// updateLog applies fn to the log and writes it through st (fenced by the
// caller), compare-and-swap where the backend allows, then makes sure the
// store's manifest records that the log exists. It returns the log as
// written.
func updateLog(ctx context.Context, st *store.Store, fn func(*migratelog.Log) error) (*migratelog.Log, error) {
	var out *migratelog.Log
	_, err := storeadmin.Internal(st).Update(ctx, logName, func(old []byte, exists bool) ([]byte, error) {
		lg := &migratelog.Log{Version: migratelog.Version}
		if exists {
			var err error
			if lg, err = migratelog.Decode(old); err != nil {
				return nil, err
			}
		}
		if err := fn(lg); err != nil {
			return nil, err
		}
		out = lg
		return json.MarshalIndent(lg, "", "  ")
	})
	if err != nil {
		return nil, err
	}
	if err := recordLog(ctx, st); err != nil {
		return nil, err
	}
	return out, nil
}
