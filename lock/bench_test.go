package lock_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/fs"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// BenchmarkAcquireRelease is one boot's lock cost: acquire a free lock
// (seal, two requests) and release it (two requests), with the envelope.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, bc := range []struct {
		name string
		new  func(b *testing.B) backend.Backend
	}{
		{"mem", func(*testing.B) backend.Backend { return mem.New(mem.Options{}) }},
		{"fs", func(b *testing.B) backend.Backend {
			be, err := fs.New(b.TempDir(), fs.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = be.(io.Closer).Close() })
			return be
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			env := testkit.Envelope(b)
			st, err := storeadmin.Open(bc.new(b), env, store.Options{})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			opts := lock.Options{InstanceID: "bench", Logger: slog.New(slog.DiscardHandler)}
			b.ReportAllocs()
			for b.Loop() {
				l, err := lock.Acquire(ctx, st, opts)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
