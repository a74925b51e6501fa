package store_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/driver"
	"github.com/cairnhq/state/store"
)

func TestGuard_PutBody_ReservedRefusedOthersForwarded(t *testing.T) {
	ctx := t.Context()
	raw := mem.New(mem.Options{})
	g := store.Guard(raw, "apps/one")
	if _, ok := g.(driver.BodyPutter); !ok {
		t.Fatal("the guard does not forward driver.BodyPutter")
	}
	body := bytes.NewReader([]byte("clobber"))
	for _, key := range []string{"apps/one/.cairn-state/token", "apps/one/.CAIRN-STATE/.lock", "apps/one/.cairn-state"} {
		if _, err := driver.PutBody(ctx, g, key, body, body.Size(), backend.PutOptions{}); !errors.Is(err, store.ErrReservedKey) {
			t.Errorf("PutBody(%q) = %v, want ErrReservedKey", key, err)
		}
	}
	if keys := rawKeys(t, raw); len(keys) != 0 {
		t.Fatalf("reserved PutBody wrote %q", keys)
	}
	if _, err := driver.PutBody(ctx, g, "apps/one/data", body, body.Size(), backend.PutOptions{}); err != nil {
		t.Fatalf("PutBody of an application key: %v", err)
	}
	if got := rawGet(t, raw, "apps/one/data"); !bytes.Equal(got, []byte("clobber")) {
		t.Errorf("the application key holds %q", got)
	}
	if keys := rawKeys(t, raw); strings.Join(keys, ",") != "apps/one/data" {
		t.Errorf("keys %q", keys)
	}
}
