package store_test

import (
	"crypto/rand"
	"testing"

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
