package store_test

import (
	"errors"
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/fault"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/store"
)

// Issue #21: at 4676a0f only Get refused a put-back object under
// RejectRollback; GetMany served it and Update built on it. Both refuse
// it now, with Get's error.
func testPutBackManyAndUpdate(t *testing.T, b backend.Backend) {
	ctx := t.Context()
	st, k, old, cur, oldBytes := putBackScene(t, b)
	mustPut(t, st, "app/other", "fine")
	wantPutBack := func(what string, err error) {
		t.Helper()
		var pb *store.PutBackError
		if !errors.Is(err, store.ErrPutBack) || !errors.As(err, &pb) || pb.Current != old.ID || pb.Newer != cur.ID {
			t.Errorf("%s = %v, want a PutBackError naming %s and %s", what, err, old.ID, cur.ID)
		}
	}
	strict := strictStore(t, b, k)

	// GetMany refuses the put-back item and serves the others.
	items, err := strict.GetMany(ctx, []string{"app/other", "app/key"}, store.ManyOptions{})
	wantPutBack("strict GetMany", err)
	wantPutBack("strict GetMany's item", items[1].Err)
	if items[1].Data != nil {
		t.Errorf("strict GetMany returned the put-back value %q", items[1].Data)
	}
	if items[0].Err != nil || string(items[0].Data) != "fine" {
		t.Errorf("strict GetMany's other item = %q, %v", items[0].Data, items[0].Err)
	}
	// Without RejectRollback GetMany is unchanged.
	if items, err := st.GetMany(ctx, []string{"app/key"}, store.ManyOptions{}); err != nil || string(items[0].Data) != "old" {
		t.Errorf("GetMany = %q, %v", items[0].Data, err)
	}

	// Update refuses it before calling fn, and writes nothing.
	fenced := storeadmin.WithFence(strict, &holderFence{switchFence: switchFence{epoch: 5}, instance: "pod-b"})
	called := false
	_, err = fenced.Update(ctx, "app/key", func(v []byte, _ bool) ([]byte, error) {
		called = true
		return append(v, '!'), nil
	})
	wantPutBack("strict Update", err)
	if called {
		t.Error("strict Update called fn with the put-back value")
	}
	if got := rawGet(t, b, store.Prefix+"app/key"); string(got) != string(oldBytes) {
		t.Error("strict Update of a put-back object wrote it")
	}
	// Objects that were not put back, and new ones, update as before.
	for _, name := range []string{"app/other", "app/new"} {
		if _, err := fenced.Update(ctx, name, func(v []byte, _ bool) ([]byte, error) { return append(v, '+'), nil }); err != nil {
			t.Errorf("strict Update of %s: %v", name, err)
		}
	}
	if data, _, err := strict.Get(ctx, "app/other"); err != nil || string(data) != "fine+" {
		t.Errorf("after strict Update: %q, %v", data, err)
	}
}

// TestStrictReads_RequestCounts counts what RejectRollback adds to
// GetMany and Update (one LIST of the name's history per name read), and
// what a Purge sends: the figures of docs/history.md and ADR 0057.
func TestStrictReads_RequestCounts(t *testing.T) {
	ctx := t.Context()
	c := newCounted(t)
	conn, count := c.connect, c.requests
	w := storeadmin.WithFence(conn(store.Options{}), &holderFence{switchFence: switchFence{epoch: 1}, instance: "a"})
	names := []string{"a", "b", "c"}
	for _, n := range names {
		mustPut(t, w, n, "v")
		mustPut(t, w, n, "w")
	}
	plain, strict := conn(store.Options{}), conn(store.Options{RejectRollback: true})
	getMany := func(st *store.Store) fault.Counts {
		return count(func() {
			if _, err := st.GetMany(ctx, names, store.ManyOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}
	if got, want := getMany(plain), (fault.Counts{Get: 3}); got != want {
		t.Errorf("GetMany of 3: %v, want %v", got, want)
	}
	if got, want := getMany(strict), (fault.Counts{Get: 3, List: 3}); got != want {
		t.Errorf("GetMany of 3, RejectRollback: %v, want %v", got, want)
	}
	update := func(st *store.Store, epoch uint64, name string) fault.Counts {
		v := storeadmin.WithFence(st, &holderFence{switchFence: switchFence{epoch: epoch}, instance: "b"})
		up := func() {
			if _, err := v.Update(ctx, name, func(old []byte, _ bool) ([]byte, error) { return append(old, '+'), nil }); err != nil {
				t.Fatal(err)
			}
		}
		up() // the first write of the holding learns the name's history
		return count(up)
	}
	// Two names in the same state (2 versions, then 2 updates: no prune).
	p, s := update(plain, 2, "a"), update(strict, 3, "c")
	t.Logf("Update, steady state: %v; with RejectRollback: %v", p, s)
	if d := (fault.Counts{Get: s.Get - p.Get, Put: s.Put - p.Put, Delete: s.Delete - p.Delete, List: s.List - p.List, Copy: s.Copy - p.Copy}); d != (fault.Counts{List: 1}) {
		t.Errorf("RejectRollback adds %v to an Update, want one LIST", d)
	}
	// Purge of a name with 2 kept versions: the object's stat (a LIST on
	// mem), its DELETE, the LIST of its history and a DELETE per entry.
	got := count(func() {
		if n, err := w.Purge(ctx, "b"); err != nil || n != 2 {
			t.Fatalf("Purge = %d, %v", n, err)
		}
	})
	t.Logf("Purge of a name with 2 kept versions: %v", got)
	if got.Delete != 3 || got.List+got.Get != 2 || got.Put != 0 || got.Copy != 0 {
		t.Errorf("Purge of a name with 2 kept versions: %v, want a stat, a LIST and 3 DELETEs", got)
	}
}

// counted is a mem store behind a request counter.
type counted struct {
	t      *testing.T
	f      *fault.Backend
	k      store.Keys
	stores []*store.Store // every connection made, settled around a count
}

// settle waits for the keeps in flight of every connection made.
func (c *counted) settle() {
	for _, st := range c.stores {
		settle(c.t, st)
	}
}

func newCounted(t *testing.T) *counted {
	return &counted{t: t, f: fault.New(mem.New(mem.Options{})), k: keysOf(testkit.Identity(t))}
}

// connect connects a store with o to the counted backend (creating the
// store the first time).
func (c *counted) connect(o store.Options) *store.Store {
	c.t.Helper()
	o.Logger = quiet()
	st, err := store.Connect(c.t.Context(), c.f, c.k, store.ConnectOptions{Create: true, Options: o})
	if err != nil {
		c.t.Fatal(err)
	}
	c.stores = append(c.stores, st)
	return st
}

// requests counts the backend calls op makes, the keeps it leaves behind
// its writes included (ADR 0065).
func (c *counted) requests(op func()) fault.Counts {
	c.settle()
	before := c.f.Counts()
	op()
	c.settle()
	after := c.f.Counts()
	return fault.Counts{Get: after.Get - before.Get, Put: after.Put - before.Put, Delete: after.Delete - before.Delete,
		List: after.List - before.List, Now: after.Now - before.Now, Copy: after.Copy - before.Copy}
}
