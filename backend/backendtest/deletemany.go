package backendtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/driver"
)

// The multi-delete cases check driver.DeleteMany, which every backend
// answers: through its driver.MultiDeleter (S3 DeleteObjects) or one
// Delete per key.

func testDeleteManyRemovesExactlyThoseKeys(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	for _, k := range []string{"d/a", "d/b", "d/c", "d/keep", "other"} {
		mustPut(t, b, k, []byte(k), backend.PutOptions{})
	}
	// A missing key, and one named twice, are not failures.
	if err := driver.DeleteMany(t.Context(), b, []string{"d/a", "d/missing", "d/c", "d/a", "other"}); err != nil {
		t.Fatalf("DeleteMany: %v", err)
	}
	// Read back, not listed: a three-node Garage's listing can still show
	// a key deleted a moment ago (DeleteObject and DeleteObjects alike);
	// its GETs do not.
	for _, k := range []string{"d/a", "d/c", "d/missing", "other"} {
		assertAbsent(t, b, k)
	}
	for _, k := range []string{"d/b", "d/keep"} {
		assertContent(t, b, k, []byte(k), "")
	}
	if err := driver.DeleteMany(t.Context(), b, nil); err != nil {
		t.Errorf("DeleteMany of no keys = %v", err)
	}
}

// More keys than one S3 request may name (1000).
func testDeleteManyLargeBatch(t *testing.T, h Harness) {
	if testing.Short() {
		t.Skip("-short: 1,100 objects")
	}
	b := h.NewBackend(t)
	var keys []string
	for i := range 1100 {
		keys = append(keys, fmt.Sprintf("batch/%04d", i))
	}
	var keep []string
	for i, k := range keys {
		mustPut(t, b, k, nil, backend.PutOptions{})
		if i%100 == 99 {
			keep = append(keep, k)
		}
	}
	var del []string
	for _, k := range keys {
		if !slices.Contains(keep, k) {
			del = append(del, k)
		}
	}
	if err := driver.DeleteMany(t.Context(), b, del); err != nil {
		t.Fatalf("DeleteMany of %d keys: %v", len(del), err)
	}
	if got := keysOf(listAll(t, b, "batch/")); !slices.Equal(got, keep) {
		t.Errorf("after DeleteMany of %d keys the backend lists %d keys %q…, want %q", len(del), len(got), got[:min(len(got), 5)], keep)
	}
}

// An invalid key fails, naming it, and the valid ones are still deleted.
func testDeleteManyInvalidKey(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	mustPut(t, b, "ok/1", []byte("x"), backend.PutOptions{})
	err := driver.DeleteMany(t.Context(), b, []string{"ok/1", "bad//key"})
	if !errors.Is(err, backend.ErrInvalidKey) {
		t.Fatalf("DeleteMany with an invalid key = %v, want ErrInvalidKey", err)
	}
	assertAbsent(t, b, "ok/1")
}

func testDeleteManyContextCancelled(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	mustPut(t, b, "c/1", []byte("x"), backend.PutOptions{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := driver.DeleteMany(ctx, b, []string{"c/1"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("DeleteMany with a cancelled context = %v, want context.Canceled", err)
	}
	assertContent(t, b, "c/1", []byte("x"), "")
}
