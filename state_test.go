package state_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"go.uber.org/goleak"

	state "github.com/cairnhq/state"
	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/fs"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/lockadmin"
	"github.com/cairnhq/state/internal/setup"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/migrate"
	"github.com/cairnhq/state/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// openT opens an instance with cfg (logging nowhere unless cfg has a
// logger) and closes it when the test ends.
func openT(t *testing.T, cfg state.Config) *state.Instance {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	inst, err := state.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inst.Close(context.Background()) })
	return inst
}

func TestOpen_FileURL_BootsRunsMigrationsAndStoreIsFencedByTheLock(t *testing.T) {
	ctx := context.Background()
	idFile, _ := testkit.IdentityFile(t)
	dir := filepath.Join(t.TempDir(), "state")
	ran := 0
	cfg := state.Config{
		URL:           "file://" + dir,
		IdentityFiles: []string{idFile},
		InstanceID:    "pod-a",
		Migrations: []migrate.Migration{{ID: "0001", Up: func(ctx context.Context, st *store.Store) error {
			ran++
			_, err := st.Put(ctx, "hello", []byte("world"), store.PutOptions{})
			return err
		}}},
		Logger: quiet(),
	}
	inst, err := state.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rec := inst.Lock().Record(); rec.InstanceID != "pod-a" || rec.Epoch == 0 {
		t.Fatalf("lock record = %+v", rec)
	}
	if fmt := inst.Migrations(); len(fmt.Ran) != 1 || ran != 1 {
		t.Fatalf("migrations = %+v", fmt)
	}
	if v, _, err := inst.Store().Get(ctx, "hello"); err != nil || string(v) != "world" {
		t.Fatalf("get hello: %q, %v", v, err)
	}
	if _, err := inst.Store().Put(ctx, ".sneaky", []byte("x"), store.PutOptions{}); !errors.Is(err, store.ErrReservedName) {
		t.Fatalf("the instance store accepted a reserved name: %v", err)
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("state directory: %v, %v", fi, err)
	}

	if err := inst.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := inst.Store().Put(ctx, "after-close", []byte("x"), store.PutOptions{}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("write after Close: %v, want ErrFenced", err)
	}
	if err := inst.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	// Released: the next instance boots at once; the migration is not rerun.
	cfg.InstanceID = "pod-b"
	next := openT(t, cfg)
	if ran != 1 || next.Migrations().AlreadyApplied != 1 {
		t.Fatalf("second boot reran migrations: ran %d, %+v", ran, next.Migrations())
	}
}

func TestOpen_EachFailingStage_IsNamedInTheError(t *testing.T) {
	idFile, id := testkit.IdentityFile(t)
	shared := mem.New(mem.Options{})
	holder := openT(t, state.Config{Backend: shared, Identities: []age.Identity{id}, InstanceID: "pod-a"})
	_ = holder
	failing := []migrate.Migration{{ID: "0001-broken", Up: func(context.Context, *store.Store) error {
		return errors.New("column missing")
	}}}

	cases := []struct {
		name  string
		cfg   state.Config
		stage state.Stage
		is    error
		says  string
	}{
		{"empty URL", state.Config{IdentityFiles: []string{idFile}}, state.StageBackend, state.ErrBadURL, "CAIRN_STATE_URL"},
		{"unknown scheme", state.Config{URL: "ftp://x/y", IdentityFiles: []string{idFile}}, state.StageBackend, state.ErrBadURL, "unknown scheme"},
		{"bad s3 URL", state.Config{URL: "s3://bucket?colour=blue", IdentityFiles: []string{idFile}}, state.StageBackend, state.ErrBadURL, "colour"},
		{"no identity", state.Config{Backend: mem.New(mem.Options{})}, state.StageEnvelope, state.ErrNoIdentity, "cairn-state keygen"},
		{"missing identity file", state.Config{Backend: mem.New(mem.Options{}), IdentityFiles: []string{"/nonexistent/id.txt"}}, state.StageEnvelope, os.ErrNotExist, "/nonexistent/id.txt"},
		{"bad recipient", state.Config{Backend: mem.New(mem.Options{}), IdentityFiles: []string{idFile}, Recipients: []string{"age1notarecipient"}}, state.StageEnvelope, nil, "age1notarecipien"}, // the envelope quotes 16 characters of a bad recipient
		{"bad root", state.Config{Backend: mem.New(mem.Options{}), Root: "../up", IdentityFiles: []string{idFile}}, state.StageStore, store.ErrInvalidRoot, ""},
		{"live foreign lock", state.Config{Backend: shared, IdentityFiles: []string{idFile}, InstanceID: "pod-b"}, state.StageLock, lock.ErrHeld, `held by "pod-a"`},
		{"failing migration", state.Config{Backend: mem.New(mem.Options{}), IdentityFiles: []string{idFile}, Migrations: failing}, state.StageMigrations, nil, "column missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.Logger = quiet()
			inst, err := state.Open(context.Background(), c.cfg)
			if err == nil {
				_ = inst.Close(context.Background())
				t.Fatal("Open succeeded")
			}
			var oe *state.OpenError
			if !errors.As(err, &oe) || oe.Stage != c.stage {
				t.Fatalf("err = %v, want an OpenError at stage %s", err, c.stage)
			}
			if !strings.HasPrefix(err.Error(), "state: open: "+string(c.stage)+": ") {
				t.Errorf("message does not start with the stage: %v", err)
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("err = %v, want it to match %v", err, c.is)
			}
			if !strings.Contains(err.Error(), c.says) {
				t.Errorf("err = %v, want it to say %q", err, c.says)
			}
		})
	}
}

func TestOpen_FailedMigration_ReleasesTheLockSoAFixedBinaryBootsAtOnce(t *testing.T) {
	_, id := testkit.IdentityFile(t)
	b := mem.New(mem.Options{})
	cfg := state.Config{Backend: b, Identities: []age.Identity{id}, InstanceID: "pod-a", Logger: quiet(),
		Migrations: []migrate.Migration{{ID: "0001", Up: func(context.Context, *store.Store) error { return errors.New("bug") }}}}
	if _, err := state.Open(context.Background(), cfg); err == nil {
		t.Fatal("Open succeeded")
	}
	assertNoLock(t, b, id)

	cfg.InstanceID = "pod-b" // another instance: it would be refused if the lock were left behind
	cfg.Migrations[0].Up = func(context.Context, *store.Store) error { return nil }
	inst := openT(t, cfg)
	if got := inst.Migrations().Rerun; len(got) != 1 {
		t.Fatalf("the failed step was not rerun: %+v", inst.Migrations())
	}
}

func TestOpen_ContextCancelledDuringMigrations_FailsAndReleases(t *testing.T) {
	_, id := testkit.IdentityFile(t)
	b := mem.New(mem.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := state.Config{Backend: b, Identities: []age.Identity{id}, Logger: quiet(),
		Migrations: []migrate.Migration{{ID: "0001-slow", Up: func(ctx context.Context, _ *store.Store) error {
			cancel() // SIGTERM arrives mid-migration
			<-ctx.Done()
			return ctx.Err()
		}}}}
	_, err := state.Open(ctx, cfg)
	var oe *state.OpenError
	if !errors.As(err, &oe) || oe.Stage != state.StageMigrations || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want stage migrations and context.Canceled", err)
	}
	assertNoLock(t, b, id)
}

func TestClose_AfterLockWasLost_LeavesTheNewHoldersLockAndReportsLoss(t *testing.T) {
	ctx := context.Background()
	_, id := testkit.IdentityFile(t)
	b := mem.New(mem.Options{})
	inst := openT(t, state.Config{Backend: b, Identities: []age.Identity{id}, InstanceID: "pod-a",
		HeartbeatInterval: 20 * time.Millisecond, StaleAfter: time.Second})

	// An operator force-breaks pod-a's lock and pod-b takes over.
	raw := connectT(t, b, id)
	// A 20 ms heartbeat between the break's read and its conditional
	// delete makes the break refuse ("changed since it was inspected"),
	// as it must: the operator inspects again.
	for {
		_, err := lockadmin.Break(ctx, raw, lockadmin.BreakOptions{Holder: "pod-a", Force: true, StaleAfter: time.Second})
		if err == nil {
			break
		}
		if !errors.Is(err, backend.ErrPreconditionFailed) {
			t.Fatal(err)
		}
	}
	other, err := lock.Acquire(ctx, raw, lock.Options{InstanceID: "pod-b", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Release(ctx) })

	select {
	case <-inst.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("the instance did not notice the loss")
	}
	if inst.Context().Err() == nil {
		t.Fatal("instance context not cancelled on loss")
	}
	if _, err := inst.Store().Put(ctx, "late", []byte("x"), store.PutOptions{}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("write after loss: %v", err)
	}
	err = inst.Close(ctx)
	if !errors.Is(err, lock.ErrLost) || !strings.Contains(err.Error(), "left to its new holder") {
		t.Fatalf("Close = %v, want lock.ErrLost", err)
	}
	s, err := lockadmin.Inspect(ctx, raw, lockadmin.InspectOptions{StaleAfter: time.Second})
	if err != nil || !s.Present || s.Record.InstanceID != "pod-b" || s.Record.AcquisitionID != other.Record().AcquisitionID {
		t.Fatalf("lock after Close: %+v, %v; want pod-b's, untouched", s, err)
	}
}

// The heartbeat has not noticed the takeover yet when Close runs: Release
// finds another holder's lock, and Close must still report the loss (and the
// example exit 4), not a plain "released".
func TestClose_TakeoverNotYetNoticed_ReportsLossAndLeavesTheNewHoldersLock(t *testing.T) {
	ctx := context.Background()
	_, id := testkit.IdentityFile(t)
	b := mem.New(mem.Options{})
	inst := openT(t, state.Config{Backend: b, Identities: []age.Identity{id}, InstanceID: "pod-a",
		HeartbeatInterval: time.Hour, StaleAfter: 2 * time.Hour})

	raw := connectT(t, b, id)
	if _, err := lockadmin.Break(ctx, raw, lockadmin.BreakOptions{Holder: "pod-a", Force: true, StaleAfter: 2 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	other, err := lock.Acquire(ctx, raw, lock.Options{InstanceID: "pod-b", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Release(ctx) })

	err = inst.Close(ctx)
	if !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Close = %v, want an error matching lock.ErrLost", err)
	}
	s, err := lockadmin.Inspect(ctx, raw, lockadmin.InspectOptions{StaleAfter: 2 * time.Hour})
	if err != nil || !s.Present || s.Record.AcquisitionID != other.Record().AcquisitionID {
		t.Fatalf("lock after Close: %+v, %v; want pod-b's, untouched", s, err)
	}
}

func TestOpenBackend_FileURLs(t *testing.T) {
	t.Chdir(t.TempDir())
	abs := filepath.Join(t.TempDir(), "abs state")
	cases := []struct {
		url  string
		dir  string // where objects must land
		fail string
	}{
		{url: "file://" + filepath.ToSlash(abs), dir: abs},
		{url: "file:///" + strings.TrimPrefix(filepath.ToSlash(abs), "/") + "/nested", dir: filepath.Join(abs, "nested")},
		{url: "file:rel/state", dir: "rel/state"},
		{url: "FILE:upper/state", dir: "upper/state"},
		{url: "File://" + filepath.ToSlash(abs) + "/mixed", dir: filepath.Join(abs, "mixed")},
		{url: "file:rel%20with%20space", dir: "rel with space"},
		{url: "file://localhost" + filepath.ToSlash(abs) + "/lh", dir: filepath.Join(abs, "lh")},
		{url: "file://otherhost/x", fail: "only local directories"},
		{url: "file:///x?sync=1", fail: "no query"},
		{url: "file:", fail: "no path"},
		{url: filepath.Join(abs, "bare"), dir: filepath.Join(abs, "bare")},
		{url: "bare/rel", dir: "bare/rel"},
		{url: "file:~/state", fail: "not expanded"},
		{url: "gopher://x/y", fail: "unknown scheme"},
	}
	for _, c := range cases {
		t.Run(c.url, func(t *testing.T) {
			b, root, err := setup.OpenBackend(context.Background(), c.url, setup.BackendOptions{Logger: quiet()})
			if c.fail != "" {
				if !errors.Is(err, state.ErrBadURL) || !strings.Contains(err.Error(), c.fail) {
					t.Fatalf("err = %v, want ErrBadURL saying %q", err, c.fail)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if root != "" {
				t.Errorf("root = %q", root)
			}
			if _, err := b.Put(context.Background(), "probe/key", []byte("x"), backend.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			// The same directory opened by path holds the object.
			direct, err := fs.New(c.dir, fs.Options{})
			if err != nil {
				t.Fatal(err)
			}
			rc, _, err := direct.Get(context.Background(), "probe/key")
			if err != nil {
				t.Fatalf("object not under %s: %v", c.dir, err)
			}
			rc.Close()
		})
	}
}

func TestConfigFromEnv_ReadsURLIdentitiesAndRecipients(t *testing.T) {
	t.Setenv(setup.EnvURL, " s3://bucket/root?region=garage ")
	t.Setenv(setup.EnvIdentity, "/keys/new.txt"+string(os.PathListSeparator)+"/keys/old.txt")
	t.Setenv(setup.EnvRecipients, "age1aaa, age1bbb\nssh-ed25519 AAAAC3 recovery@laptop\n# a comment\n")
	c := state.ConfigFromEnv()
	if c.URL != "s3://bucket/root?region=garage" {
		t.Errorf("URL = %q", c.URL)
	}
	if strings.Join(c.IdentityFiles, "|") != "/keys/new.txt|/keys/old.txt" {
		t.Errorf("IdentityFiles = %q", c.IdentityFiles)
	}
	if strings.Join(c.Recipients, "|") != "age1aaa|age1bbb|ssh-ed25519 AAAAC3 recovery@laptop" {
		t.Errorf("Recipients = %q", c.Recipients)
	}

	t.Setenv(setup.EnvURL, "")
	t.Setenv(setup.EnvIdentity, "")
	t.Setenv(setup.EnvRecipients, "")
	if c := state.ConfigFromEnv(); c.URL != "" || c.IdentityFiles != nil || c.Recipients != nil {
		t.Errorf("empty environment gave %+v", c)
	}
}

func TestOpen_ExtraRecipient_CanOpenEveryObject(t *testing.T) {
	ctx := context.Background()
	_, id := testkit.IdentityFile(t)
	recovery := testkit.Identity(t)
	b := mem.New(mem.Options{})
	inst := openT(t, state.Config{Backend: b, Identities: []age.Identity{id}, Recipients: []string{recovery.Recipient().String()}})
	if _, err := inst.Store().Put(ctx, "token", []byte("t0k3n"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	// The recovery key alone opens the object, with the stock age parser:
	// the store's recipient set includes it.
	rc, _, err := b.Get(ctx, store.Prefix+"token")
	if err != nil {
		t.Fatal(err)
	}
	sealed, _ := io.ReadAll(rc)
	rc.Close()
	var got bytes.Buffer
	if err := envelope.Recover("token", sealed, &got, recovery); err != nil || got.String() != "t0k3n" {
		t.Fatalf("recovery key: %q, %v", got.String(), err)
	}
	if m, _ := storeadmin.Manifest(inst.Store()); len(m.Recipients) != 2 {
		t.Errorf("the store's recipients %v, want the identity's and the recovery key", m.Recipients)
	}
}

// connectT connects to b's store with id, as a tool beside the instance
// would.
func connectT(t *testing.T, b backend.Backend, id age.Identity) *store.Store {
	t.Helper()
	st, err := store.Connect(context.Background(), b, store.Keys{Identities: []age.Identity{id}},
		store.ConnectOptions{Options: store.Options{Logger: quiet()}})

	if err != nil {
		t.Fatal(err)
	}
	return st
}

// assertNoLock fails unless nobody holds the lock of b's store (a
// released lock object, which compare-and-swap mode keeps, is not held).
func assertNoLock(t *testing.T, b backend.Backend, id age.Identity) {
	t.Helper()
	s, err := lockadmin.Inspect(context.Background(), connectT(t, b, id), lockadmin.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Present {
		t.Fatalf("a held lock was left behind: %+v", s)
	}
}

func TestOpen_NoMigrationsConfigured_OpensStateThatAnAppMigrated(t *testing.T) {
	_, id := testkit.IdentityFile(t)
	b := mem.New(mem.Options{})
	app := state.Config{Backend: b, Identities: []age.Identity{id}, InstanceID: "app", Logger: quiet(),
		Migrations: []migrate.Migration{{ID: "0001", Up: func(context.Context, *store.Store) error { return nil }}}}
	inst, err := state.Open(context.Background(), app)
	if err != nil {
		t.Fatal(err)
	}
	if err := inst.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	tool := openT(t, state.Config{Backend: b, Identities: []age.Identity{id}, InstanceID: "backup-tool"})
	if res := tool.Migrations(); len(res.Ran) != 0 || res.AlreadyApplied != 0 {
		t.Fatalf("migrations = %+v, want the stage skipped", res)
	}

	// With a list that lacks the applied step, Open refuses (a downgrade).
	if err := tool.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	older := app
	older.Migrations = []migrate.Migration{{ID: "0000-older", Up: func(context.Context, *store.Store) error { return nil }}}
	if _, err := state.Open(context.Background(), older); !errors.Is(err, migrate.ErrUnknownMigration) {
		t.Fatalf("Open with an older list: %v, want ErrUnknownMigration", err)
	}
}
