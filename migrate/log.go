package migrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/store"
)

// logVersion is the format version of the log object; see ADR 0010.
const logVersion = 1

// logDoc is the JSON document stored, sealed, under logName.
type logDoc struct {
	Version int      `json:"version"`
	Records []Record `json:"records"`
}

func (lg *logDoc) find(id string) *Record {
	for i := range lg.Records {
		if lg.Records[i].ID == id {
			return &lg.Records[i]
		}
	}
	return nil
}

// upsert returns the record for id, appending an empty one if needed.
func (lg *logDoc) upsert(id string) *Record {
	if r := lg.find(id); r != nil {
		return r
	}
	lg.Records = append(lg.Records, Record{ID: id})
	return &lg.Records[len(lg.Records)-1]
}

// unknownApplied lists applied records whose IDs are not in ms.
func (lg *logDoc) unknownApplied(ms []Migration) []string {
	var out []string
	for _, r := range lg.Records {
		if r.State == StateApplied && !slices.ContainsFunc(ms, func(m Migration) bool { return m.ID == r.ID }) {
			out = append(out, r.ID)
		}
	}
	return out
}

// appliedAfter returns the first ID of rest that the log records as applied.
func (lg *logDoc) appliedAfter(rest []Migration) string {
	for _, m := range rest {
		if r := lg.find(m.ID); r != nil && r.State == StateApplied {
			return m.ID
		}
	}
	return ""
}

func decodeLog(data []byte) (*logDoc, error) {
	var lg logDoc
	if err := json.Unmarshal(data, &lg); err != nil {
		return nil, fmt.Errorf("migration log %s: %w", logName, err)
	}
	if lg.Version != logVersion {
		return nil, fmt.Errorf("migration log %s: format version %d, this code reads version %d", logName, lg.Version, logVersion)
	}
	return &lg, nil
}

// ErrLogMissing means the migration log does not exist although the
// store's manifest records that it did (storemeta.Manifest.MigrationLog): it
// was deleted. Nothing is run again: every migration would, seed
// migrations resetting what they seeded. The error names the log.
var ErrLogMissing = errors.New("the migration log is missing, but the store's manifest says it exists")

// readLog reads the log; an absent log is an empty one, unless the
// store's manifest says it exists (ErrLogMissing). exists reports
// whether it was there.
func readLog(ctx context.Context, st *store.Store) (lg *logDoc, exists bool, err error) {
	data, _, err := storeadmin.Internal(st).Get(ctx, logName)
	if isNotFound(err) {
		if m, ok := storeadmin.Manifest(st); ok && m.MigrationLog {
			key, _ := storeadmin.Key(storeadmin.Internal(st), logName)
			return nil, false, fmt.Errorf("migrations: %w: %s is gone, but the manifest of store %s (generation %d) records it; "+
				"restore it from a backup (no migration was run again)", ErrLogMissing, key, m.ID, m.Generation)
		}
		return &logDoc{Version: logVersion}, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading migration log: %w", err)
	}
	lg, err = decodeLog(data)
	return lg, err == nil, err
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
func updateLog(ctx context.Context, st *store.Store, fn func(*logDoc) error) (*logDoc, error) {
	var out *logDoc
	_, err := storeadmin.Internal(st).Update(ctx, logName, func(old []byte, exists bool) ([]byte, error) {
		lg := &logDoc{Version: logVersion}
		if exists {
			var err error
			if lg, err = decodeLog(old); err != nil {
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

func isNotFound(err error) bool {
	return err != nil && errors.Is(err, backend.ErrNotFound)
}
