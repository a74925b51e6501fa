package migrate_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"filippo.io/age"

	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/migrate"
	"github.com/cairnhq/state/store"
)

func ExampleRun() {
	ctx := context.Background()
	id, _ := age.GenerateX25519Identity()
	st, _ := store.Connect(ctx, mem.New(mem.Options{}), store.Keys{Identities: []age.Identity{id}}, store.ConnectOptions{Create: true})

	// Migrations run only while the instance lock is held.
	lk, err := lock.Acquire(ctx, st, lock.Options{InstanceID: "pod-a", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer lk.Release(ctx)

	ms := []migrate.Migration{{
		ID:          "0001-default-greeting",
		Description: "write the default greeting",
		Up: func(ctx context.Context, st *store.Store) error {
			// Idempotent: keep a greeting that is already there.
			_, err := st.Update(ctx, "greeting", func(old []byte, exists bool) ([]byte, error) {
				if exists {
					return old, nil
				}
				return []byte("hello"), nil
			})
			return err
		},
	}}
	res, err := migrate.Run(ctx, lk, st, ms, migrate.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	fmt.Println("ran:", res.Ran)

	// The log remembers: the next boot runs nothing.
	res, err = migrate.Run(ctx, lk, st, ms, migrate.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	fmt.Println("ran:", res.Ran, "already applied:", res.AlreadyApplied)
	// Output:
	// ran: [0001-default-greeting]
	// ran: [] already applied: 1
}

// Importing an application's former on-disk state once, as the first
// migration. The directory is left in place; a machine without it (a new
// volume) boots from the store.
func ExampleImportDir() {
	ctx := context.Background()
	legacy, _ := os.MkdirTemp("", "legacy-")
	defer os.RemoveAll(legacy)
	_ = os.MkdirAll(filepath.Join(legacy, "keys"), 0o700)
	_ = os.WriteFile(filepath.Join(legacy, "keys", "signing.key"), []byte("k3y"), 0o600)

	id, _ := age.GenerateX25519Identity()
	st, _ := store.Connect(ctx, mem.New(mem.Options{}), store.Keys{Identities: []age.Identity{id}}, store.ConnectOptions{Create: true})
	lk, _ := lock.Acquire(ctx, st, lock.Options{InstanceID: "pod-a", Logger: slog.New(slog.DiscardHandler)})
	defer lk.Release(ctx)

	imp := migrate.ImportDir(legacy, "legacy/")
	imp.ID = "0001-import-legacy-state"
	if _, err := migrate.Run(ctx, lk, st, []migrate.Migration{imp}, migrate.Options{Logger: slog.New(slog.DiscardHandler)}); err != nil {
		panic(err)
	}
	v, _, _ := st.Get(ctx, "legacy/keys/signing.key")
	fmt.Printf("legacy/keys/signing.key = %s\n", v)
	// Output:
	// legacy/keys/signing.key = k3y
}

// An import for instances that may never have had the directory (a fresh
// install): a missing one imports nothing and the step is recorded as
// applied. ImportDir, by contrast, fails the boot naming the directory.
func ExampleImportDirIfPresent() {
	ctx := context.Background()
	id, _ := age.GenerateX25519Identity()
	st, _ := store.Connect(ctx, mem.New(mem.Options{}), store.Keys{Identities: []age.Identity{id}}, store.ConnectOptions{Create: true})
	lk, _ := lock.Acquire(ctx, st, lock.Options{InstanceID: "pod-a", Logger: slog.New(slog.DiscardHandler)})
	defer lk.Release(ctx)

	missing := filepath.Join(os.TempDir(), "cairn-state-example-never-existed")
	quiet := migrate.Options{Logger: slog.New(slog.DiscardHandler)}
	_, err := migrate.Run(ctx, lk, st, []migrate.Migration{migrate.ImportDir(missing, "legacy/")}, quiet)
	fmt.Println("ImportDir:", errors.Is(err, fs.ErrNotExist))
	res, err := migrate.Run(ctx, lk, st, []migrate.Migration{migrate.ImportDirIfPresent(missing, "legacy/")}, quiet)
	fmt.Println("ImportDirIfPresent:", err, len(res.Ran))
	// Output:
	// ImportDir: true
	// ImportDirIfPresent: <nil> 1
}
