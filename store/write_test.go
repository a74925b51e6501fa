package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/fault"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/store"
)

// The requests a fenced write costs on storage with conditional writes
// (docs/adr/0026): after a read of the object, its conditional PUT alone;
// a blind write of an object the view never saw, a stat first; after a
// write of its own, the PUT alone again.
func TestFencedWrite_RequestsPerWrite(t *testing.T) {
	ctx := t.Context()
	f := fault.New(mem.New(mem.Options{}))
	base := testkit.Store(t, f, store.Options{Logger: quiet()})
	if _, err := base.Put(ctx, "read", []byte("v0"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	fenced := storeadmin.WithFence(base, &switchFence{})
	step := func(what string, want fault.Counts, op func() error) {
		t.Helper()
		f.ResetCounts()
		if err := op(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		got := f.Counts()
		t.Logf("%s: %s", what, got)
		if got.Put != want.Put || got.Total() != want.Total() {
			t.Errorf("%s: %s, want put=%d total=%d", what, got, want.Put, want.Total())
		}
	}
	step("read", fault.Counts{Get: 1}, func() error { _, _, err := fenced.Get(ctx, "read"); return err })
	step("write after a read", fault.Counts{Put: 1}, func() error {
		_, err := fenced.Put(ctx, "read", []byte("v1"), store.PutOptions{})
		return err
	})
	step("blind write", fault.Counts{Put: 1, List: 1}, func() error {
		_, err := fenced.Put(ctx, "blind", []byte("v1"), store.PutOptions{})
		return err
	})
	step("write after a write", fault.Counts{Put: 1}, func() error {
		_, err := fenced.Put(ctx, "blind", []byte("v2"), store.PutOptions{})
		return err
	})
	step("unfenced write", fault.Counts{Put: 1}, func() error {
		_, err := base.Put(ctx, "other", []byte("v1"), store.PutOptions{})
		return err
	})
}

// Every fenced write is conditional on the version the view knows: a
// write that meets another version (here an unfenced write between) is
// re-examined and written on the version found; a write sent on a version
// that changed meanwhile — a late write of a deposed holder — fails
// instead of replacing it.
func TestFencedWrite_ConditionalOnTheKnownVersion(t *testing.T) {
	ctx := t.Context()
	inner, sealer := mem.New(mem.Options{}), testkit.Envelope(t)
	f := fault.New(inner)
	base, err := storeadmin.Open(f, sealer, store.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	next, err := storeadmin.Open(inner, sealer, store.Options{Logger: quiet()}) // another holder's
	if err != nil {
		t.Fatal(err)
	}
	fenced := storeadmin.WithFence(base, &switchFence{})
	if _, err := fenced.Put(ctx, "app", []byte("a1"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := base.Put(ctx, "app", []byte("outside"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := fenced.Put(ctx, "app", []byte("a2"), store.PutOptions{}); err != nil {
		t.Fatalf("a fenced write that meets a changed version is re-examined: %v", err)
	}
	if got, _, _ := base.Get(ctx, "app"); string(got) != "a2" {
		t.Fatalf("app = %q, want a2", got)
	}
	var conds []fault.Call
	f.SetHook(func(_ context.Context, c fault.Call) error {
		if c.Op == fault.OpPut || c.Op == fault.OpDelete {
			conds = append(conds, c)
		}
		return nil
	})
	deliver := f.HoldWrites(func(key string) bool { return strings.HasSuffix(key, "/app") })
	cut, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := fenced.Put(cut, "app", []byte("late"), store.PutOptions{}); err == nil || !strings.Contains(err.Error(), "may still have landed") {
		t.Fatalf("a cut-off fenced write = %v, want an error saying it may have landed", err)
	}
	// Another holder writes before the late write is delivered.
	if _, err := next.Put(ctx, "app", []byte("next holder"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	errs := deliver()
	if len(errs) != 1 || !errors.Is(errs[0], backend.ErrPreconditionFailed) {
		t.Fatalf("the late fenced write = %v, want it refused by its condition", errs)
	}
	if got, _, _ := base.Get(ctx, "app"); string(got) != "next holder" {
		t.Fatalf("app = %q, want the next holder's value", got)
	}
	if len(conds) == 0 || conds[0].IfVersion == "" {
		t.Fatalf("the fenced write carried no condition: %+v", conds)
	}
}
