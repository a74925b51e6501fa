package migrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/store"
)

// logVersion is the format version of the log object; see ADR 0010.
const logVersion = 1

// logDoc is the JSON document stored, sealed, under LogName.
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
		return nil, fmt.Errorf("migration log %s: %w", LogName, err)
	}
	if lg.Version != logVersion {
		return nil, fmt.Errorf("migration log %s: format version %d, this code reads version %d", LogName, lg.Version, logVersion)
	}
	return &lg, nil
}

// readLog reads the log; an absent log is an empty one.
func readLog(ctx context.Context, st *store.Store) (*logDoc, error) {
	data, _, err := st.Internal().Get(ctx, LogName)
	if isNotFound(err) {
		return &logDoc{Version: logVersion}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading migration log: %w", err)
	}
	return decodeLog(data)
}

// updateLog applies fn to the log and writes it through st (fenced by the
// caller), compare-and-swap where the backend allows. It returns the log as
// written.
func updateLog(ctx context.Context, st *store.Store, fn func(*logDoc) error) (*logDoc, error) {
	var out *logDoc
	_, err := st.Internal().Update(ctx, LogName, func(old []byte, exists bool) ([]byte, error) {
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
	return out, nil
}

func isNotFound(err error) bool {
	return err != nil && errors.Is(err, backend.ErrNotFound)
}
