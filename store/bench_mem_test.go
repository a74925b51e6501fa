package store_test

import (
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
	b.Run("Get4KiB", func(b *testing.B) {
		b.SetBytes(int64(len(value)))
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := st.Get(ctx, "one"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Put4KiB", func(b *testing.B) {
		b.SetBytes(int64(len(value)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := st.Put(ctx, "one", value, store.PutOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
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
	b.Run("Get64B", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := st.Get(ctx, "one"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Put64B", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := st.Put(ctx, "one", value, store.PutOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
