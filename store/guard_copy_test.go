package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/driver"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/store"
)

// The guard's server-side copy refuses a reserved key on either side, so
// the application can neither copy sealed state out nor copy over it, and
// forwards the rest.
func TestGuard_Copy_ReservedEitherSideRefused_OthersForwarded(t *testing.T) {
	ctx := t.Context()
	raw := mem.New(mem.Options{})
	s := testkit.Store(t, raw, store.Options{Root: "apps/one"})
	if _, err := s.Put(ctx, "token", []byte("secret"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	g := store.Guard(raw, "apps/one")
	if _, err := g.Put(ctx, "apps/one/data", []byte("app data"), backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	before := rawKeys(t, raw)
	for _, c := range [][2]string{
		{"apps/one/.cairn-state/token", "apps/one/stolen"},
		{"apps/one/data", "apps/one/.cairn-state/token"},
		{"apps/one/data", "apps/one/.CAIRN-STATE/token"},
	} {
		if _, err := driver.Copy(ctx, g, c[0], c[1], backend.CopyOptions{}); !errors.Is(err, store.ErrReservedKey) {
			t.Errorf("Copy(%q → %q) through the guard = %v, want ErrReservedKey", c[0], c[1], err)
		}
	}
	if after := rawKeys(t, raw); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Errorf("keys changed from %q to %q through the guard", before, after)
	}
	if _, err := driver.Copy(ctx, g, "apps/one/data", "apps/one/data-copy", backend.CopyOptions{}); err != nil {
		t.Errorf("Copy of the application's own object through the guard: %v", err)
	}
}
