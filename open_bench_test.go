package state_test

import (
	"context"
	"io"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"filippo.io/age"

	state "github.com/cairnhq/state"
	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/fs"
	"github.com/cairnhq/state/internal/testkit"
)

// countingBackend counts the requests made to the backend it wraps.
type countingBackend struct {
	backend.Backend
	gets, puts, deletes, lists, nows atomic.Int64
}

func (c *countingBackend) Get(ctx context.Context, key string) (io.ReadCloser, backend.Object, error) {
	c.gets.Add(1)
	return c.Backend.Get(ctx, key)
}

func (c *countingBackend) Put(ctx context.Context, key string, data []byte, opts backend.PutOptions) (backend.Object, error) {
	c.puts.Add(1)
	return c.Backend.Put(ctx, key, data, opts)
}

func (c *countingBackend) Delete(ctx context.Context, key string, opts backend.DeleteOptions) error {
	c.deletes.Add(1)
	return c.Backend.Delete(ctx, key, opts)
}

func (c *countingBackend) List(ctx context.Context, prefix string, fn func(backend.Object) error) error {
	c.lists.Add(1)
	return c.Backend.List(ctx, prefix, fn)
}

func (c *countingBackend) Now(ctx context.Context) (time.Time, error) {
	c.nows.Add(1)
	return c.Backend.Now(ctx)
}

func (c *countingBackend) total() int64 {
	return c.gets.Load() + c.puts.Load() + c.deletes.Load() + c.lists.Load() + c.nows.Load()
}

// BenchmarkOpen_Requests measures state.Open alone (Close is outside the
// timer) on a local directory that has booted before, and counts the
// backend requests one Open makes: what the store identity check adds to
// a boot.
//
//	go test -run '^$' -bench 'Open_Requests' -count 10 .
func BenchmarkOpen_Requests(b *testing.B) {
	ctx := context.Background()
	cb, cfg := bootedStore(b)
	var gets, puts, deletes, lists, total int64
	b.ReportAllocs()
	for b.Loop() {
		g, p, d, l, t := cb.gets.Load(), cb.puts.Load(), cb.deletes.Load(), cb.lists.Load(), cb.total()
		inst, err := state.Open(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		gets += cb.gets.Load() - g
		puts += cb.puts.Load() - p
		deletes += cb.deletes.Load() - d
		lists += cb.lists.Load() - l
		total += cb.total() - t
		b.StopTimer()
		if err := inst.Close(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(float64(total)/n, "requests/op")
	b.ReportMetric(float64(gets)/n, "gets/op")
	b.ReportMetric(float64(puts)/n, "puts/op")
	b.ReportMetric(float64(deletes)/n, "deletes/op")
	b.ReportMetric(float64(lists)/n, "lists/op")
}

// TestOpen_ExistingStore_Requests pins the backend requests of state.Open
// on a store that has booted before (issue #24; it was 5): the manifest's
// GET, and the lock's GET and conditional PUT of the lock object kept
// released between holders (docs/adr/0066).
func TestOpen_ExistingStore_Requests(t *testing.T) {
	ctx := t.Context()
	cb, cfg := bootedStore(t)
	g, p, d, l, n := cb.gets.Load(), cb.puts.Load(), cb.deletes.Load(), cb.lists.Load(), cb.nows.Load()
	inst, err := state.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close(ctx)
	got := [5]int64{cb.gets.Load() - g, cb.puts.Load() - p, cb.deletes.Load() - d, cb.lists.Load() - l, cb.nows.Load() - n}
	if want := [5]int64{2, 1, 0, 0, 0}; got != want {
		t.Fatalf("state.Open on an existing store: gets, puts, deletes, lists, nows = %v, want %v", got, want)
	}
}

// bootedStore is a local directory's store that has booted once, behind a
// request counter, and the configuration that opens it.
func bootedStore(tb testing.TB) (*countingBackend, state.Config) {
	tb.Helper()
	ctx := context.Background()
	id := testkit.Identity(tb)
	raw, err := fs.New(filepath.Join(tb.TempDir(), "state"), fs.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	cb := &countingBackend{Backend: raw}
	cfg := state.Config{Backend: cb, Identities: []age.Identity{id}, InstanceID: "count", Logger: quiet()}
	first, err := state.Open(ctx, cfg) // the store exists before the measured boots
	if err != nil {
		tb.Fatal(err)
	}
	if err := first.Close(ctx); err != nil {
		tb.Fatal(err)
	}
	return cb, cfg
}
