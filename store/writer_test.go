package store_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/store"
)

// writerOf opens the raw object at the state name internal (a kept
// version, a tombstone, an object) through st's internal view and
// returns the writer its header names.
func writerOf(t *testing.T, st *store.Store, internal string) envelope.Writer {
	t.Helper()
	obj, err := storeadmin.GetObject(t.Context(), storeadmin.Internal(st), internal)
	if err != nil {
		t.Fatalf("open %s: %v", internal, err)
	}
	return obj.Opened.Writer
}

// versionWriters is History of name as "ID INSTANCE" strings, newest
// first.
func versionWriters(t *testing.T, st *store.Store, name string) []string {
	t.Helper()
	vs, err := st.History(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, v := range vs {
		out = append(out, v.ID.String()+" "+v.Instance)
	}
	return out
}

func holderWriter(instance string) envelope.Writer {
	return envelope.Writer{Instance: instance, Hostname: "host-" + instance, PID: 42}
}

// Every write a fenced view makes — a value, its keep, a streamed value,
// a tombstone, a restore — names the holder of the view's fence in its
// header; an unfenced write, or one fenced by a fence that cannot say who
// holds it, names no one. The bucket's bytes carry neither the instance
// nor the host.
func testEveryWriteSealsItsHolder(t *testing.T, b backend.Backend) {
	ctx := t.Context()
	k := keysOf(testkit.Identity(t))
	a := historyStore(t, b, k, 3, "pod-a", 0)
	first := mustPut(t, a, "app/v", "one")
	streamed, err := a.PutReader(ctx, "app/v", strings.NewReader("two"), store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	settle(t, a)
	for _, info := range []store.Info{first, streamed} {
		entry := ".history/app/v/" + info.ID.String()
		if w := writerOf(t, a, entry); w != holderWriter("pod-a") {
			t.Errorf("kept version %s names %+v, want pod-a's", entry, w)
		}
	}
	if obj, err := storeadmin.GetObject(ctx, a, "app/v"); err != nil || obj.Opened.Writer != holderWriter("pod-a") {
		t.Errorf("the current object names %+v, %v; want pod-a's", obj.Opened.Writer, err)
	}
	// Another holding restores pod-a's first version: a new write, by
	// pod-b; then deletes it: its tombstone is pod-b's too.
	bst := historyStore(t, b, k, 4, "pod-b", 0)
	res, err := bst.Restore(ctx, "app/v", first.ID)
	if err != nil {
		t.Fatal(err)
	}
	if w := writerOf(t, bst, "app/v"); w != holderWriter("pod-b") {
		t.Errorf("the restored object names %+v, want pod-b's (a restore is the restorer's write)", w)
	}
	if err := bst.Delete(ctx, "app/v", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	tomb := res.Written.ID
	tomb.Sequence++
	if w := writerOf(t, bst, ".history/app/v/"+tomb.String()+".deleted"); w != holderWriter("pod-b") {
		t.Errorf("the tombstone names %+v, want pod-b's", w)
	}
	// Unfenced, and fenced without a Holder: no one.
	plain, err := store.Connect(ctx, b, k, store.ConnectOptions{Options: store.Options{Logger: quiet()}})
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, plain, "plain", "x")
	mustPut(t, storeadmin.WithFence(plain, &switchFence{epoch: 5}), "anonymous", "x")
	for _, n := range []string{"plain", "anonymous"} {
		if w := writerOf(t, plain, n); w != (envelope.Writer{}) {
			t.Errorf("%s names %+v, want no one", n, w)
		}
	}
	// The storage operator reads no instance or host in any object.
	settle(t, a)
	settle(t, bst)
	for _, key := range rawKeys(t, b) {
		raw := rawGet(t, b, key)
		for _, s := range []string{"pod-a", "pod-b", "host-pod"} {
			if bytes.Contains(raw, []byte(s)) {
				t.Errorf("%s carries %q in the bucket's bytes", key, s)
			}
		}
	}
}

// No write of any kind writes a writer record under .history/.writers/.
func testNoWritersDirectory(t *testing.T, b backend.Backend) {
	ctx := t.Context()
	k := keysOf(testkit.Identity(t))
	for i, inst := range []string{"pod-a", "pod-b"} {
		st := historyStore(t, b, k, uint64(i+1), inst, 0)
		mustPut(t, st, "app/w", inst)
		if _, err := st.PutReader(ctx, "app/w", strings.NewReader(inst+" streamed"), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := st.Delete(ctx, "app/w", store.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Undelete(ctx, "app/w"); err != nil {
			t.Fatal(err)
		}
	}
	for _, key := range rawKeys(t, b) {
		if strings.Contains(key, "/.writers/") || strings.Contains(key, ".history/.") {
			t.Errorf("%s was written: history has no records of its own beside versions and tombstones", key)
		}
	}
}

// History names the writer of each version from the version's own
// header: two holders writing in one epoch (which only a writer record
// per epoch could not tell apart), a restore by a third, a tombstone by
// the deleter; ListDeleted names the last version's writer.
func testHistoryNamesEachVersionsWriter(t *testing.T, b backend.Backend) {
	ctx := t.Context()
	k := keysOf(testkit.Identity(t))
	a := historyStore(t, b, k, 5, "pod-a", 0)
	first := mustPut(t, a, "app/h", "one")
	conn, err := store.Connect(ctx, b, k, store.ConnectOptions{Options: store.Options{Logger: quiet()}})
	if err != nil {
		t.Fatal(err)
	}
	x := storeadmin.WithFence(conn, &holderFence{switchFence: switchFence{epoch: 5, seq: 100}, instance: "pod-x"})
	second := mustPut(t, x, "app/h", "two")
	settle(t, x)
	c := historyStore(t, b, k, 6, "pod-c", 0)
	res, err := c.Restore(ctx, "app/h", first.ID)
	if err != nil {
		t.Fatal(err)
	}
	id := func(i store.Info) string { return i.ID.String() }
	want := []string{id(res.Written) + " pod-c", id(second) + " pod-x", id(first) + " pod-a"}
	if got := versionWriters(t, c, "app/h"); !slices.Equal(got, want) {
		t.Fatalf("History = %q, want %q", got, want)
	}
	d := historyStore(t, b, k, 7, "pod-d", 0)
	if err := d.Delete(ctx, "app/h", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if vs, err := d.History(ctx, "app/h"); err != nil || len(vs) != 4 || !vs[0].Deleted || vs[0].Instance != "pod-d" || vs[1].Instance != "pod-c" {
		t.Fatalf("History after pod-d's delete = %+v, %v; want its tombstone named pod-d, then pod-c's version", vs, err)
	}
	var deleted []store.Deleted
	if err := d.ListDeleted(ctx, "app/", func(x store.Deleted) error { deleted = append(deleted, x); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(deleted) != 1 || deleted[0].Last.ID.String() != id(res.Written) || deleted[0].Last.Instance != "pod-c" {
		t.Fatalf("ListDeleted = %+v, want the last version %s written by pod-c", deleted, id(res.Written))
	}
}

// A holder whose names do not fit the header's writer field is still
// named: the host cut first, then the instance, at a character boundary.
func TestWriter_LongNames_CutToFit(t *testing.T) {
	b := mem.New(mem.Options{})
	k := keysOf(testkit.Identity(t))
	st, err := store.Connect(t.Context(), b, k, store.ConnectOptions{Create: true, Options: store.Options{Logger: quiet()}})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("é", 200) // 400 bytes
	v := storeadmin.WithFence(st, &holderFence{switchFence: switchFence{epoch: 1}, instance: long})
	mustPut(t, v, "app/x", "v")
	w := writerOf(t, v, "app/x")
	if len(w.Instance)+len(w.Hostname) > envelope.MaxWriterLen || !strings.HasPrefix(long, w.Instance) || !strings.HasPrefix("host-"+long, w.Hostname) || len(w.Instance) < 100 || w.PID != 42 {
		t.Errorf("writer of a holder with 400-byte names = %d-byte instance, %d-byte host, pid %d", len(w.Instance), len(w.Hostname), w.PID)
	}
}
