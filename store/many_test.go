package store_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/store"
)

// slowBackend delays every Get and records the most Gets in flight at once.
type slowBackend struct {
	backend.Backend
	delay             time.Duration
	inFlight, maxSeen atomic.Int64
}

func (b *slowBackend) Get(ctx context.Context, key string) (io.ReadCloser, backend.Object, error) {
	n := b.inFlight.Add(1)
	defer b.inFlight.Add(-1)
	for {
		m := b.maxSeen.Load()
		if n <= m || b.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(b.delay)
	return b.Backend.Get(ctx, key)
}

func putNumbered(t testing.TB, s *store.Store, n int) []string {
	t.Helper()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("obj/%04d", i)
		if _, err := s.Put(t.Context(), names[i], []byte(names[i]), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return names
}

func TestGetMany_ReadsAllInOrderWithBoundedConcurrency(t *testing.T) {
	for _, c := range []struct{ asked, want int }{{4, 4}, {0, store.DefaultConcurrency}, {-1, store.DefaultConcurrency}} {
		sb := &slowBackend{Backend: mem.New(mem.Options{}), delay: 10 * time.Millisecond}
		s := testkit.Store(t, sb, store.Options{})
		names := putNumbered(t, s, 64)
		items, err := s.GetMany(t.Context(), names, store.ManyOptions{Concurrency: c.asked})
		if err != nil {
			t.Fatal(err)
		}
		for i, it := range items {
			if it.Name != names[i] || string(it.Data) != names[i] || it.Info.Name != names[i] || it.Err != nil {
				t.Fatalf("item %d = %+v, want %q", i, it, names[i])
			}
		}
		if got := sb.maxSeen.Load(); got != int64(c.want) {
			t.Errorf("concurrency %d: at most %d reads in flight, want %d", c.asked, got, c.want)
		}
	}
}

func TestGetMany_MissingObject_ItemErrorAndJoinedError(t *testing.T) {
	s, _ := newStore(t, store.Options{})
	names := putNumbered(t, s, 5)
	names = append(names[:2], append([]string{"missing"}, names[2:]...)...)
	items, err := s.GetMany(t.Context(), names, store.ManyOptions{Concurrency: 2})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetMany = %v, want an error matching ErrNotFound", err)
	}
	var many *store.ManyError
	if !errors.As(err, &many) || len(many.Errs) != 1 || many.Total != 6 {
		t.Fatalf("GetMany error %v, want a ManyError with 1 of 6 failed", err)
	}
	for i, it := range items {
		if (it.Err != nil) != (i == 2) {
			t.Errorf("item %d (%s): err %v", i, it.Name, it.Err)
		}
	}
	if !errors.Is(items[2].Err, store.ErrNotFound) {
		t.Errorf("missing item error %v, want ErrNotFound", items[2].Err)
	}
}

func TestGetMany_CancelledContext_EveryItemFails(t *testing.T) {
	s, _ := newStore(t, store.Options{})
	names := putNumbered(t, s, 10)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	items, err := s.GetMany(ctx, names, store.ManyOptions{Concurrency: 3})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("GetMany = %v, want context.Canceled", err)
	}
	for _, it := range items {
		if !errors.Is(it.Err, context.Canceled) {
			t.Errorf("item %s: %v, want context.Canceled", it.Name, it.Err)
		}
	}
}

func TestGetMany_NoNames_NoItems(t *testing.T) {
	s, _ := newStore(t, store.Options{})
	items, err := s.GetMany(t.Context(), nil, store.ManyOptions{})
	if err != nil || len(items) != 0 {
		t.Fatalf("GetMany(nil) = %v, %v", items, err)
	}
}

// countingBackend counts the bytes of object bodies read and not yet
// closed: what a bulk read holds in memory while it reads. Each read is
// slowed so that reads overlap.
type countingBackend struct {
	backend.Backend
	inFlight, maxSeen atomic.Int64
}

func (b *countingBackend) Get(ctx context.Context, key string) (io.ReadCloser, backend.Object, error) {
	rc, obj, err := b.Backend.Get(ctx, key)
	if err != nil {
		return nil, obj, err
	}
	return &countedBody{ReadCloser: rc, b: b}, obj, nil
}

type countedBody struct {
	io.ReadCloser
	b    *countingBackend
	read int64
}

func (c *countedBody) Read(p []byte) (int, error) {
	time.Sleep(200 * time.Microsecond)
	n, err := c.ReadCloser.Read(p[:min(len(p), 64<<10)])
	c.read += int64(n)
	v := c.b.inFlight.Add(int64(n))
	for m := c.b.maxSeen.Load(); v > m && !c.b.maxSeen.CompareAndSwap(m, v); m = c.b.maxSeen.Load() {
	}
	return n, err
}

func (c *countedBody) Close() error {
	c.b.inFlight.Add(-c.read)
	c.read = 0
	return c.ReadCloser.Close()
}

func TestGetMany_BoundedByBytesInFlight(t *testing.T) {
	const objects, size = 16, 1 << 20
	for _, c := range []struct {
		name     string
		budget   int64
		min, max int64
	}{
		// Three objects' worth: at least two are read at once, never four.
		{"budget 3 MiB", 3*size + 4096*3, 2 * size, 3*size + 3*4096},
		// One object larger than the budget is read alone.
		{"budget below one object", size / 2, size / 2, size + 4096},
		// Unbounded, the 16 reads overlap: the measurement can see more.
		{"unbounded", 1 << 40, 4 * size, objects * (size + 4096)},
	} {
		t.Run(c.name, func(t *testing.T) {
			cb := &countingBackend{Backend: mem.New(mem.Options{})}
			s := testkit.Store(t, cb, store.Options{})
			value := make([]byte, size)
			var names []string
			for i := range objects {
				names = append(names, fmt.Sprintf("big/%02d", i))
				if _, err := s.Put(t.Context(), names[i], value, store.PutOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			items, err := s.GetMany(t.Context(), names, store.ManyOptions{Concurrency: objects, MaxBytesInFlight: c.budget})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range items {
				if len(it.Data) != size {
					t.Fatalf("%s: %d bytes", it.Name, len(it.Data))
				}
			}
			if got := cb.maxSeen.Load(); got < c.min || got > c.max {
				t.Errorf("at most %d bytes in flight, want between %d and %d", got, c.min, c.max)
			}
			t.Logf("peak %d KiB in flight", cb.maxSeen.Load()>>10)
		})
	}
}
