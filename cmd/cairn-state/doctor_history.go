package main

import (
	"context"
	"fmt"

	"github.com/cairnhq/state/internal/storeadmin"
)

// checkHistory is doctor's history line (storeadmin.HistoryUsage: one listing
// of .cairn-state/.history/): how many versions of how many names it
// keeps, and their size.
const checkHistory = "history"

// historyFacts are the history check's, for --json.
type historyFacts struct {
	Names      int   `json:"names"`
	Versions   int   `json:"versions"`
	Tombstones int   `json:"tombstones"`
	Bytes      int64 `json:"bytes"`
	Keeping    int   `json:"keeping"`
}

func (d *doctor) checkHistory(ctx context.Context) {
	st := d.storeFor(ctx, checkHistory)
	if st == nil {
		return
	}
	u, err := storeadmin.HistoryUsageOf(ctx, st)
	if err != nil {
		d.storageError(checkHistory, "listing history", err)
		return
	}
	f := &historyFacts{Names: u.Names, Versions: u.Versions, Tombstones: u.Tombstones, Bytes: u.Bytes, Keeping: storeadmin.KeptVersions(st)}
	d.add(checkHistory, statusOK, fmt.Sprintf("%s of %s, %s, %s (keeping %d per name)", plural(u.Versions, "version"), plural(u.Names, "name"),
		plural(u.Tombstones, "tombstone"), byteSize(u.Bytes), f.Keeping), "", f)
}
