package store_test

import (
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/store"
)

func increment(old []byte, exists bool) ([]byte, error) {
	n := 0
	if exists {
		var err error
		if n, err = strconv.Atoi(string(old)); err != nil {
			return nil, err
		}
	}
	return []byte(strconv.Itoa(n + 1)), nil
}

// incrementConcurrently runs writers goroutines that each apply increment
// to "counter" each times through Update, fails the test on any Update
// error, and returns the stored counter.
func incrementConcurrently(t *testing.T, s *store.Store, writers, each int) []byte {
	t.Helper()
	ctx := t.Context()
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range each {
				if _, err := s.Update(ctx, "counter", increment); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	got, _, err := s.Get(ctx, "counter")
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestUpdate_ConcurrentWriters_NoUpdateLost(t *testing.T) {
	s, _ := newStore(t, store.Options{UpdateAttempts: 1000})
	const writers, each = 8, 10
	got := incrementConcurrently(t, s, writers, each)
	if string(got) != strconv.Itoa(writers*each) {
		t.Fatalf("counter = %s after %d concurrent increments", got, writers*each)
	}
}

func TestUpdate_EndlessConflict_GivesUpWithErrConflict(t *testing.T) {
	ctx := t.Context()
	s, _ := newStore(t, store.Options{UpdateAttempts: 3})
	calls := 0
	_, err := s.Update(ctx, "hot", func(old []byte, exists bool) ([]byte, error) {
		calls++
		// Another writer gets in between every read and write.
		if _, err := s.Put(ctx, "hot", []byte("theirs"), store.PutOptions{}); err != nil {
			return nil, err
		}
		return []byte("mine"), nil
	})
	if !errors.Is(err, store.ErrConflict) || !errors.Is(err, store.ErrPreconditionFailed) {
		t.Fatalf("Update = %v, want ErrConflict and ErrPreconditionFailed", err)
	}
	if calls != 3 {
		t.Errorf("fn ran %d times, want 3 (UpdateAttempts)", calls)
	}
	got, _, _ := s.Get(ctx, "hot")
	if string(got) != "theirs" {
		t.Errorf("value %q, want the other writer's", got)
	}
}

func TestUpdate_FnError_ReturnedAndNothingWritten(t *testing.T) {
	ctx := t.Context()
	s, _ := newStore(t, store.Options{})
	before, _ := s.Put(ctx, "v", []byte("1"), store.PutOptions{})
	boom := errors.New("refuse")
	if _, err := s.Update(ctx, "v", func([]byte, bool) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("Update = %v, want fn's error", err)
	}
	after, _ := s.Stat(ctx, "v")
	if after.Version != before.Version {
		t.Errorf("version changed from %s to %s although fn failed", before.Version, after.Version)
	}
}

func TestUpdate_AbsentThenPresent_SeesExists(t *testing.T) {
	ctx := t.Context()
	s, _ := newStore(t, store.Options{})
	for want := 1; want <= 3; want++ {
		info, err := s.Update(ctx, "n", increment)
		if err != nil {
			t.Fatal(err)
		}
		got, cur, _ := s.Get(ctx, "n")
		if string(got) != strconv.Itoa(want) || cur.Version != info.Version {
			t.Fatalf("after update %d: %q (version %s), Update reported version %s", want, got, cur.Version, info.Version)
		}
	}
}

func TestUpdate_NoConditionalWrites_LastWriterWins(t *testing.T) {
	ctx := t.Context()
	s := testkit.Store(t, mem.New(mem.Options{NoConditionalWrites: true}), store.Options{})
	for range 3 {
		if _, err := s.Update(ctx, "n", increment); err != nil {
			t.Fatalf("Update without conditional writes: %v", err)
		}
	}
	// A writer that gets in between is overwritten: last writer wins.
	_, err := s.Update(ctx, "n", func(old []byte, exists bool) ([]byte, error) {
		if _, err := s.Put(ctx, "n", []byte("theirs"), store.PutOptions{}); err != nil {
			return nil, err
		}
		return increment(old, exists)
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _, _ := s.Get(ctx, "n")
	if string(got) != "4" {
		t.Errorf("value %q, want 4 (the concurrent write is lost, as documented)", got)
	}
}
