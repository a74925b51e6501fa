package store_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/store"
)

func TestGuard_ReservedKeys_RefusedAndNothingTouched(t *testing.T) {
	ctx := t.Context()
	for _, c := range []struct {
		root     string
		reserved []string
		allowed  []string
	}{
		{"", []string{".cairn-state/token", ".cairn-state/.lock", ".CAIRN-State/token", ".cairn-state"},
			[]string{"app/data", ".cairn-statex", "apps/one/.cairn-state/x"}},
		{"apps/one", []string{"apps/one/.cairn-state/token", "apps/one/.cairn-state/.lock", "apps/one/.cairn-state"},
			[]string{"apps/one/data", "apps/one/.cairn-statefile", ".cairn-stately"}},
	} {
		raw := mem.New(mem.Options{})
		s := testkit.Store(t, raw, store.Options{Root: c.root})
		if _, err := s.Put(ctx, "token", []byte("secret"), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		before := rawKeys(t, raw)
		g := store.Guard(raw, c.root)
		for _, key := range c.reserved {
			if _, _, err := g.Get(ctx, key); !errors.Is(err, store.ErrReservedKey) {
				t.Errorf("root %q: Get(%q) = %v, want ErrReservedKey", c.root, key, err)
			}
			if _, err := g.Put(ctx, key, []byte("clobber"), backend.PutOptions{}); !errors.Is(err, store.ErrReservedKey) {
				t.Errorf("root %q: Put(%q) = %v, want ErrReservedKey", c.root, key, err)
			}
			if err := g.Delete(ctx, key, backend.DeleteOptions{}); !errors.Is(err, store.ErrReservedKey) {
				t.Errorf("root %q: Delete(%q) = %v, want ErrReservedKey", c.root, key, err)
			} else if !strings.Contains(err.Error(), key) {
				t.Errorf("error %q does not name the key", err)
			}
		}
		if after := rawKeys(t, raw); strings.Join(after, ",") != strings.Join(before, ",") {
			t.Errorf("root %q: keys changed from %q to %q through the guard", c.root, before, after)
		}
		if _, _, err := s.Get(ctx, "token"); err != nil {
			t.Errorf("root %q: state unreadable after guarded writes: %v", c.root, err)
		}
		for _, key := range c.allowed {
			if _, err := g.Put(ctx, key, []byte(key), backend.PutOptions{}); err != nil {
				t.Errorf("root %q: Put(%q) through the guard: %v", c.root, key, err)
			}
			rc, _, err := g.Get(ctx, key)
			if err != nil {
				t.Errorf("root %q: Get(%q) through the guard: %v", c.root, key, err)
				continue
			}
			rc.Close()
		}
	}
}

func TestGuard_List_HidesStateAndRefusesReservedPrefix(t *testing.T) {
	ctx := t.Context()
	raw := mem.New(mem.Options{})
	s := testkit.Store(t, raw, store.Options{Root: "r"})
	for _, n := range []string{"a", "b/c"} {
		if _, err := s.Put(ctx, n, []byte("secret"), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"r/.a", "r/z", ".cairn-state/other-root"} {
		if _, err := raw.Put(ctx, k, []byte("app"), backend.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	g := store.Guard(raw, "/r/")
	var keys []string
	if err := g.List(ctx, "", func(o backend.Object) error {
		keys = append(keys, o.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(keys, ","); got != ".cairn-state/other-root,r/.a,r/z" {
		t.Errorf("guarded List = %s, want the application's keys only", got)
	}
	for _, p := range []string{"r/.cairn-state/", "r/.cairn-state/b", "R/.Cairn-State/"} {
		if err := g.List(ctx, p, func(backend.Object) error { return nil }); !errors.Is(err, store.ErrReservedKey) {
			t.Errorf("List(%q) = %v, want ErrReservedKey", p, err)
		}
	}
}

func TestGuard_PassesCapabilitiesAndClock(t *testing.T) {
	raw := mem.New(mem.Options{NoConditionalWrites: true})
	g := store.Guard(raw, "")
	if g.Capabilities() != raw.Capabilities() {
		t.Error("capabilities differ through the guard")
	}
	if _, err := g.Now(t.Context()); err != nil {
		t.Error(err)
	}
	if _, err := g.Put(t.Context(), "x", []byte("1"), backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rawGet(t, raw, "x"), []byte("1")) {
		t.Error("write through the guard not stored")
	}
}
