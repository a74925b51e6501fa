package state_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"

	state "github.com/cairnhq/state"
	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/migratelog"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/storemeta"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/migrate"
	"github.com/cairnhq/state/store"
)

// seedMigration seeds an admin password with its default, as seed
// migrations do.
var seedMigration = migrate.Migration{ID: "0001-seed-admin", Up: func(ctx context.Context, st *store.Store) error {
	_, err := st.Put(ctx, "admin/password", []byte("default"), store.PutOptions{})
	return err
}}

// Issue #24, finding 4: deleting .migrations re-ran every migration on
// 0ac0f30 (a missing log was a fresh store), the seed resetting the admin
// password to its default; no key was needed. Now the manifest records the
// log, and a missing one is refused, naming it.
func TestOpen_MigrationLogDeleted_RefusedNamingIt_SeedNotRerun(t *testing.T) {
	testkit.Local(t, func(t *testing.T, b backend.Backend) {
		ctx := t.Context()
		_, id := testkit.IdentityFile(t)
		cfg := state.Config{Backend: b, Identities: []age.Identity{id}, InstanceID: "app", Logger: quiet(),
			Migrations: []migrate.Migration{seedMigration}}
		inst := openT(t, cfg)
		if m, _ := storeadmin.Manifest(inst.Store()); !m.MigrationLog {
			t.Fatalf("the manifest does not record the migration log: %+v", m)
		}
		if _, err := inst.Store().Put(ctx, "admin/password", []byte("changed"), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := inst.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := b.Delete(ctx, store.Prefix+storemeta.MigrationLogName, backend.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err := state.Open(ctx, cfg)
		var oe *state.OpenError
		if !errors.Is(err, migrate.ErrLogMissing) || !errors.As(err, &oe) || oe.Stage != state.StageMigrations || !strings.Contains(err.Error(), ".cairn-state/.migrations") {
			t.Fatalf("Open without the log = %v, want ErrLogMissing at the migrations stage naming the log", err)
		}
		st := connectT(t, b, id)
		if got, _, err := st.Get(ctx, "admin/password"); err != nil || string(got) != "changed" {
			t.Fatalf("admin/password = %q, %v: the seed ran again", got, err)
		}
		if _, err := migratelog.Applied(ctx, st); !errors.Is(err, migrate.ErrLogMissing) {
			t.Errorf("migratelog.Applied without the log = %v, want ErrLogMissing", err)
		}
	})
}

// Issue #24, finding 1 through state.Open: the manifest deleted (with
// objects left) fails at the store stage, saying so, and writes nothing.
func TestOpen_ManifestDeleted_FailsAtTheStoreStage_NothingWritten(t *testing.T) {
	testkit.Local(t, func(t *testing.T, b backend.Backend) {
		ctx := t.Context()
		_, id := testkit.IdentityFile(t)
		cfg := state.Config{Backend: b, Identities: []age.Identity{id}, InstanceID: "app", Logger: quiet()}
		inst := openT(t, cfg)
		if _, err := inst.Store().Put(ctx, "token", []byte("v"), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := inst.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := b.Delete(ctx, store.Prefix+storemeta.ManifestName, backend.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		before := testkit.Snapshot(t, b)
		_, err := state.Open(ctx, cfg)
		var oe *state.OpenError
		if !errors.Is(err, store.ErrManifestMissing) || !errors.As(err, &oe) || oe.Stage != state.StageStore {
			t.Fatalf("Open = %v, want ErrManifestMissing at the store stage", err)
		}
		if after := testkit.Snapshot(t, b); !maps.Equal(before, after) {
			t.Errorf("Open wrote: %v → %v", before, after)
		}
	})
}

// state.Open creates a store on the first boot, logging it at warning
// level with its id, the location and how to pin it; Config.StoreID pins
// it: another store is refused at the store stage, an empty location is
// not made a store (nor, for file:, a directory).
func TestOpen_FirstBootWarnsWithTheID_StoreIDPinsIt(t *testing.T) {
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "state")
	path, _ := testkit.IdentityFile(t)
	var log testkit.SyncBuffer
	cfg := state.Config{URL: "file://" + dir, IdentityFiles: []string{path}, InstanceID: "app",
		Logger: slog.New(slog.NewTextHandler(&log, nil))}
	inst := openT(t, cfg)
	m, _ := storeadmin.Manifest(inst.Store())
	if err := inst.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"level=WARN", "created a new store", "store_id=" + m.ID.String(), "location=file://" + dir, "StoreID"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the first boot's log lacks %q:\n%s", want, log.String())
		}
	}
	cfg.Logger = quiet()
	cfg.StoreID = m.ID.String()
	openT(t, cfg).Close(ctx)

	other := m.ID
	other[15] ^= 1
	cfg.StoreID = other.String()
	_, err := state.Open(ctx, cfg)
	var oe *state.OpenError
	if !errors.Is(err, store.ErrWrongStore) || !errors.As(err, &oe) || oe.Stage != state.StageStore {
		t.Fatalf("Open pinned to another store = %v, want ErrWrongStore at the store stage", err)
	}
	cfg.URL = "file://" + filepath.Join(t.TempDir(), "elsewhere")
	if _, err := state.Open(ctx, cfg); !errors.Is(err, state.ErrNoStore) && !errors.Is(err, store.ErrNoStore) {
		t.Fatalf("Open pinned on an empty location = %v, want a no-store error", err)
	}
	if _, err := os.Stat(strings.TrimPrefix(cfg.URL, "file://")); !os.IsNotExist(err) {
		t.Errorf("a pinned Open made the directory: %v", err)
	}
	cfg.StoreID = "not hex"
	if _, err := state.Open(ctx, cfg); err == nil || !strings.Contains(err.Error(), "Config.StoreID") {
		t.Errorf("a malformed StoreID: %v", err)
	}
}

// Config.RequireConfiguredRecipients refuses a store sealed to a recipient
// the configuration does not list.
func TestOpen_RequireConfiguredRecipients(t *testing.T) {
	b := mem.New(mem.Options{})
	_, id := testkit.IdentityFile(t)
	_, leaked := testkit.IdentityFile(t)
	openT(t, state.Config{Backend: b, Identities: []age.Identity{id}, Recipients: []string{leaked.Recipient().String()}, InstanceID: "a"}).Close(t.Context())
	_, err := state.Open(t.Context(), state.Config{Backend: b, Identities: []age.Identity{id}, InstanceID: "a", Logger: quiet(), RequireConfiguredRecipients: true})
	if !errors.Is(err, store.ErrUnlistedRecipient) {
		t.Fatalf("Open = %v, want ErrUnlistedRecipient", err)
	}
	assertNoLock(t, b, id)
}

// Writes through the instance's store carry the lock's epoch and a write
// sequence that grows across views; the lock's own records carry none.
func TestOpen_WritesStampedWithTheLocksEpochAndSequence(t *testing.T) {
	ctx := t.Context()
	b := mem.New(mem.Options{})
	_, id := testkit.IdentityFile(t)
	openT(t, state.Config{Backend: b, Identities: []age.Identity{id}, InstanceID: "a"}).Close(ctx)
	inst := openT(t, state.Config{Backend: b, Identities: []age.Identity{id}, InstanceID: "a"})
	epoch := inst.Lock().Record().Epoch
	var last uint64
	for i := range 3 {
		info, err := inst.Store().Put(ctx, fmt.Sprintf("n%d", i), []byte("v"), store.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		obj, err := storeadmin.GetObject(ctx, inst.Store(), info.Name)
		if err != nil || info.ID.Epoch != epoch || info.ID.Sequence <= last || obj.Opened.Stamp != (envelope.Stamp{Generation: 1, Epoch: epoch, Sequence: info.ID.Sequence}) {
			t.Fatalf("write %d is version %s, stamped %+v (%v); want epoch %d, a sequence above %d, generation 1", i, info.ID, obj.Opened.Stamp, err, epoch, last)
		}
		last = info.ID.Sequence
	}
	if epoch < 2 {
		t.Fatalf("epoch %d: the second boot should be at 2 at least", epoch)
	}
	st := connectT(t, b, id)
	obj, err := storeadmin.GetObject(ctx, storeadmin.Internal(st), storemeta.LockName)
	if err != nil {
		t.Fatal(err)
	}
	if obj.Opened.Stamp.Epoch != 0 || obj.Opened.Stamp.Sequence != 0 {
		t.Errorf("the lock's own record is stamped %+v, want epoch and sequence 0", obj.Opened.Stamp)
	}
}
