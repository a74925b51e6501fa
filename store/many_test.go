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
		s, err := store.Open(sb, newSealer(t), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		names := putNumbered(t, s, 64)
		items, err := s.GetMany(t.Context(), names, c.asked)
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
	items, err := s.GetMany(t.Context(), names, 2)
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
	items, err := s.GetMany(ctx, names, 3)
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
	items, err := s.GetMany(t.Context(), nil, 0)
	if err != nil || len(items) != 0 {
		t.Fatalf("GetMany(nil) = %v, %v", items, err)
	}
}
