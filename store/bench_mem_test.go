package store_test

import (
	"context"
	"crypto/rand"
	"testing"

	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/store"
)

// BenchmarkMem measures the store's own CPU cost (sealing, opening, name
// checks) over the in-memory backend, without any network.
//
//	go test -run x -bench Mem -count 5 ./store
//
// With -args -store.bench-metrics it records metrics (see benchProvider).
func BenchmarkMem(b *testing.B) {
	st, _ := newStore(b, store.Options{MeterProvider: benchProvider(b)})
	ctx := b.Context()
	value := make([]byte, 4<<10)
	rand.Read(value)
	if _, err := st.Put(ctx, "one", value, store.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	b.Run("Get4KiB", func(b *testing.B) { loop(b, len(value), getOne(ctx, st)) })
	b.Run("Put4KiB", func(b *testing.B) { loop(b, len(value), putOne(ctx, st, value)) })
}

// plainSealer seals nothing: BenchmarkMemPlain measures the store's own
// code (names, fences, size checks, metrics) without the cryptography that
// dominates BenchmarkMem.
type plainSealer struct{}

func (plainSealer) Seal(_ string, p []byte) ([]byte, error) { return p, nil }
func (plainSealer) Open(_ string, s []byte) ([]byte, error) { return s, nil }

// BenchmarkMemPlain is BenchmarkMem without sealing, on 64-byte values,
// so that a fixed cost per operation shows:
//
//	go test -run '^$' -bench MemPlain -count 10 ./store [-args -store.bench-metrics]
func BenchmarkMemPlain(b *testing.B) {
	st, err := storeadmin.Open(mem.New(mem.Options{}), plainSealer{}, store.Options{MeterProvider: benchProvider(b)})
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	value := make([]byte, 64)
	if _, err := st.Put(ctx, "one", value, store.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	b.Run("Get64B", func(b *testing.B) { loop(b, 0, getOne(ctx, st)) })
	b.Run("Put64B", func(b *testing.B) { loop(b, 0, putOne(ctx, st, value)) })
}

// loop runs op in a b.Loop, reporting allocations and, unless size is 0,
// size bytes an operation.
func loop(b *testing.B, size int, op func() error) {
	if size > 0 {
		b.SetBytes(int64(size))
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := op(); err != nil {
			b.Fatal(err)
		}
	}
}

// getOne reads the name "one" of st; putOne writes value there.
func getOne(ctx context.Context, st *store.Store) func() error {
	return func() error { _, _, err := st.Get(ctx, "one"); return err }
}

func putOne(ctx context.Context, st *store.Store, value []byte) func() error {
	return func() error { _, err := st.Put(ctx, "one", value, store.PutOptions{}); return err }
}
