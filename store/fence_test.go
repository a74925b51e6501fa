package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cairnhq/state/store"
)

var errLockLost = errors.New(`state lock lost: taken over by "pod-b"`)

func TestWithFence_LockLost_WritesRefusedReadsWork(t *testing.T) {
	ctx := t.Context()
	base, _ := newStore(t, store.Options{})
	fence := &switchFence{}
	s := base.WithFence(fence)
	if _, err := s.Put(ctx, "a", []byte("1"), store.PutOptions{}); err != nil {
		t.Fatalf("Put while the fence holds: %v", err)
	}
	fence.trip(errLockLost)

	check := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrFenced) || !errors.Is(err, errLockLost) {
			t.Errorf("%s after the lock was lost = %v, want ErrFenced and the fence's error", op, err)
		} else if !strings.Contains(err.Error(), `"a"`) || !strings.Contains(err.Error(), "pod-b") {
			t.Errorf("%s error %q should name the object and say why", op, err)
		}
	}
	_, err := s.Put(ctx, "a", []byte("2"), store.PutOptions{})
	check("Put", err)
	check("Delete", s.Delete(ctx, "a", store.DeleteOptions{}))
	_, err = s.Update(ctx, "a", increment)
	check("Update", err)
	_, err = store.PutJSON(ctx, s, "a", 1, 2, store.PutOptions{})
	check("PutJSON", err)
	_, err = s.Internal().Put(ctx, ".migrations", []byte("x"), store.PutOptions{})
	if !errors.Is(err, store.ErrFenced) {
		t.Errorf("Internal view of a fenced store: Put = %v, want ErrFenced", err)
	}

	if got, _, err := s.Get(ctx, "a"); err != nil || string(got) != "1" {
		t.Errorf("Get on a fenced store = %q, %v; want the old value", got, err)
	}
	if _, err := s.Stat(ctx, "a"); err != nil {
		t.Errorf("Stat on a fenced store: %v", err)
	}
	if names := listNames(t, s, ""); len(names) != 1 {
		t.Errorf("List on a fenced store = %q", names)
	}
	// The unfenced base (the lock's own view) still writes.
	if _, err := base.Put(ctx, "a", []byte("3"), store.PutOptions{}); err != nil {
		t.Errorf("Put through the unfenced base: %v", err)
	}
}

func TestWithFence_Stacked_EachFenceChecked(t *testing.T) {
	base, _ := newStore(t, store.Options{})
	outer, inner := &switchFence{}, &switchFence{}
	s := base.WithFence(outer).WithFence(inner)
	outer.trip(errLockLost)
	if _, err := s.Put(t.Context(), "a", nil, store.PutOptions{}); !errors.Is(err, errLockLost) {
		t.Errorf("Put = %v, want the outer fence's error", err)
	}
	if base.WithFence(nil) != base {
		t.Error("WithFence(nil) should return the store itself")
	}
}
