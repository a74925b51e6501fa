package migrate_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cairnhq/state/migrate"
	"github.com/cairnhq/state/store"
)

// BenchmarkImportDir measures the legacy import as Run performs it: read,
// seal, write, read back, open and compare 100 files of 4 KiB into an
// in-memory backend, plus the step's two log writes.
func BenchmarkImportDir_100Files4KiB(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	for i := range 100 {
		data := make([]byte, 4<<10)
		_, _ = rand.Read(data)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d", i)), data, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	st := newStore(b)
	l := acquire(b, st, "bench")
	b.SetBytes(100 * 4 << 10)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++ // a fresh prefix each time, so every file is written
		m := migrate.ImportDir(dir, fmt.Sprintf("r%d/", i))
		if _, err := migrate.Run(ctx, l, st, []migrate.Migration{m}, migrate.Options{Logger: quietLogger(), AllowUnknown: true}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRun_AllApplied measures what every boot after the first pays
// for migrations: reading the log and finding nothing to do.
func BenchmarkRun_AllApplied_20Steps(b *testing.B) {
	ctx := context.Background()
	st := newStore(b)
	l := acquire(b, st, "bench")
	var ms []migrate.Migration
	for i := range 20 {
		ms = append(ms, migrate.Migration{ID: fmt.Sprintf("%04d", i), Up: func(context.Context, *store.Store) error { return nil }})
	}
	if _, err := migrate.Run(ctx, l, st, ms, migrate.Options{Logger: quietLogger()}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := migrate.Run(ctx, l, st, ms, migrate.Options{Logger: quietLogger()}); err != nil {
			b.Fatal(err)
		}
	}
}
