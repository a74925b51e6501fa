package state_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"filippo.io/age"

	state "github.com/cairnhq/state"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/migrate"
	"github.com/cairnhq/state/store"
)

// BenchmarkOpenClose_FS measures a whole boot and graceful shutdown on a
// local directory whose migrations are already applied: backend,
// envelope, store, lock acquisition (compare-and-swap), migration log
// read, lock release.
func BenchmarkOpenClose_FS(b *testing.B) {
	ctx := context.Background()
	id := testkit.Identity(b)
	var ms []migrate.Migration
	for i := range 5 {
		ms = append(ms, migrate.Migration{ID: fmt.Sprintf("%04d", i), Up: func(context.Context, *store.Store) error { return nil }})
	}
	cfg := state.Config{
		URL:        "file://" + filepath.Join(b.TempDir(), "state"),
		Identities: []age.Identity{id},
		InstanceID: "bench",
		Migrations: ms,
		Logger:     quiet(),
	}
	b.ReportAllocs()
	for b.Loop() {
		inst, err := state.Open(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := inst.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
