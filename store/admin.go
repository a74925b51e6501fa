package store

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/cairnhq/state/internal/storehook"
	"github.com/cairnhq/state/internal/storemeta"
)

// The store's administration is for cairn-state's own packages, through
// internal/storeadmin (docs/adr/0050); an application never calls it.
func init() {
	storehook.Register(&storehook.Ops[*Store, storemeta.Manifest, Keys]{
		Internal:           (*Store).internalView,
		Rebind:             (*Store).rebind,
		CommitManifest:     (*Store).commitManifest,
		RecordMigrationLog: (*Store).recordMigrationLog,
		ManifestWritten:    (*Store).manifestWritten,
		Key:                (*Store).key,
		KeyPrefix:          (*Store).keyPrefix,
		Backend:            (*Store).backend,
		Now:                (*Store).now,
		ConditionalWrites:  (*Store).conditionalWrites,
	})
	storehook.Set("Manifest", (*Store).manifest)
	storehook.Set("RecipientDiff", (*Store).recipientDiff)
	storehook.Set("Reseal", (*Store).reseal)
	storehook.Set("KeptVersions", (*Store).keptVersions)
	storehook.Set("LastKept", (*Store).lastKept)
	storehook.Set("WaitKeeps", (*Store).waitKeeps)
	storehook.Set("Root", (*Store).root)
	storehook.Set("StoreID", (*Store).storeID)
	storehook.Set("WithFence", (*Store).withFence)
	storehook.Set("GetObject", (*Store).getObjectNamed)
	storehook.Set("Verify", (*Store).verify)
	storehook.Set("HistoryUsage", (*Store).historyUsage)
	storehook.Set("PutBackOf", func(err error) (current, newer VersionID, deleted, ok bool) {
		var pb *putBackError
		if !errors.As(err, &pb) {
			return VersionID{}, VersionID{}, false, false
		}
		return pb.Current, pb.Newer, pb.Deleted, true
	})
	storehook.Set("Open", openStore)
	storehook.Set("StoreIDTime", storeIDTime)
	storehook.Set("IsHistoryRecord", isHistoryRecord)
	storehook.Set("ValidateName", checkAppName)
	storehook.Set("Prepare", func(s *Store, ctx context.Context, name string, r io.Reader) (storehook.Upload, error) {
		u, err := s.prepare(ctx, name, r)
		if err != nil {
			return nil, err
		}
		return u, nil
	})
	storehook.Set("PutUpload", func(s *Store, ctx context.Context, u storehook.Upload, opts PutOptions) (Info, error) {
		up, ok := u.(*upload)
		if !ok {
			return Info{}, fmt.Errorf("store: put: %T is not an upload this store prepared", u)
		}
		return s.putUpload(ctx, up, opts)
	})
}
