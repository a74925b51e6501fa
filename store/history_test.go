package store_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/fs"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/garageserver"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/store"
	"github.com/cairnhq/state/testutil/garage"
	"github.com/cairnhq/state/testutil/versitygw"
)

// holderFence is a switchFence that says who holds it (a storeadmin.Holder),
// so that the views it fences write writer records.
type holderFence struct {
	switchFence
	instance string
}

func (f *holderFence) Holder() storeadmin.HolderInfo {
	return storeadmin.HolderInfo{Instance: f.instance, Hostname: "host-" + f.instance, PID: 42, Epoch: f.epoch}
}

// holdings are the views historyStore made on each backend: a new holding
// begins once the holdings before it are over, their keeps landed, as a
// lock's Release drains them before another holder can take over.
var holdings sync.Map // backend.Backend → *[]*store.Store

// historyStore connects to b (creating the store) and returns the view
// fenced by a holder of epoch, named instance, keeping history versions,
// once the keeps of the views it made on b before have landed.
func historyStore(t *testing.T, b backend.Backend, k store.Keys, epoch uint64, instance string, history int) *store.Store {
	t.Helper()
	v, loaded := holdings.LoadOrStore(b, new([]*store.Store))
	if !loaded {
		t.Cleanup(func() { holdings.Delete(b) })
	}
	earlier := v.(*[]*store.Store)
	for _, st := range *earlier {
		settle(t, st)
	}
	// Warnings (a keep or a prune that failed) go to the test's output.
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	st, err := store.Connect(t.Context(), b, k, store.ConnectOptions{Create: true, Options: store.Options{Logger: logger, History: history}})
	if err != nil {
		t.Fatal(err)
	}
	view := storeadmin.WithFence(st, &holderFence{switchFence: switchFence{epoch: epoch}, instance: instance})
	if _, ok := storeadmin.Manifest(st); ok && !b.Capabilities().ConditionalWrites {
		// Without conditional writes a new manifest waits for the lock.
		if err := storeadmin.CommitManifest(t.Context(), view); err != nil {
			t.Fatal(err)
		}
	}
	*earlier = append(*earlier, view)
	// Keeps still in flight when the test ends land before its backend
	// is closed (cleanups run last first) and while it can log.
	t.Cleanup(func() { settle(t, view) })
	return view
}

// entryKeys lists the raw history keys of name (its versions and
// tombstones, not deeper names').
func entryKeys(t *testing.T, b backend.Backend, name string) []string {
	t.Helper()
	dir := store.Prefix + ".history/" + name + "/"
	var out []string
	for _, k := range rawKeys(t, b) {
		if rest, ok := strings.CutPrefix(k, dir); ok && !strings.Contains(rest, "/") {
			out = append(out, rest)
		}
	}
	return out
}

func ids(vs []store.Version) []string {
	var out []string
	for _, v := range vs {
		s := v.ID.String()
		if v.Deleted {
			s += " deleted"
		}
		if v.Current {
			s += " current"
		}
		if !v.Kept {
			s += " not kept"
		}
		out = append(out, s)
	}
	return out
}

func mustPut(t *testing.T, st *store.Store, name, value string) store.Info {
	t.Helper()
	info, err := st.Put(t.Context(), name, []byte(value), store.PutOptions{})
	if err != nil {
		t.Fatalf("put %s = %q: %v", name, value, err)
	}
	return info
}

// runHistoryTests runs the history tests on backends made by fresh.
func runHistoryTests(t *testing.T, fresh func(t *testing.T) backend.Backend) {
	t.Run("Overwrite_KeepsEveryVersion", func(t *testing.T) { testOverwriteKeepsEveryVersion(t, fresh(t)) })
	t.Run("Delete_KeepsTheLastVersionAndATombstone_Undelete", func(t *testing.T) { testDeleteAndUndelete(t, fresh(t)) })
	t.Run("Restore_WritesANewVersionAndKeepsTheReplaced", func(t *testing.T) { testRestore(t, fresh(t)) })
	t.Run("Retention_PrunesExactly", func(t *testing.T) { testRetentionPrunesExactly(t, fresh) })
	t.Run("Takeover_NewHolderContinuesTheSequence", func(t *testing.T) { testTakeoverContinues(t, fresh(t)) })
	t.Run("ReservedAndUnfenced_NotVersioned", func(t *testing.T) { testNotVersioned(t, fresh(t)) })
	t.Run("PutBack_PreviousVersion_VerifyReportsAndStrictRefuses", func(t *testing.T) { testPutBackPrevious(t, fresh(t)) })
	t.Run("PutBack_DeletedObjectBroughtBack_VerifyReportsAndStrictRefuses", func(t *testing.T) { testPutBackDeleted(t, fresh(t)) })
	t.Run("PutBack_ForgedNewerEntryKey_NotARefusal_VerifyReportsMisnamed", func(t *testing.T) { testForgedEntryKey(t, fresh(t)) })
	t.Run("PutReader_KeepsEveryVersionLikePut", func(t *testing.T) { testPutReaderKeeps(t, fresh(t)) })
	t.Run("FirstWrite_KeepsAVersionItsListingDoesNotShow", func(t *testing.T) { testFirstWriteKeepsUnlisted(t, fresh(t)) })
	t.Run("PutBack_StrictGetManyAndUpdateRefuse", func(t *testing.T) { testPutBackManyAndUpdate(t, fresh(t)) })
	t.Run("Purge_RemovesTheNameAndItsHistoryOnly", func(t *testing.T) { testPurge(t, fresh(t)) })
	// The writer each object names in its header (writer_test.go).
	t.Run("EveryFencedWrite_SealsItsHolder_NotReadableInTheBucket", func(t *testing.T) { testEveryWriteSealsItsHolder(t, fresh(t)) })
	t.Run("NoWritersDirectory", func(t *testing.T) { testNoWritersDirectory(t, fresh(t)) })
	t.Run("History_NamesEachVersionsWriterFromItsHeader", func(t *testing.T) { testHistoryNamesEachVersionsWriter(t, fresh(t)) })
}

// testFirstWriteKeepsUnlisted: the first write of a name in a holding
// sends its write conditional on what the name's history listing implies
// (ADR 0055); where the listing does not show the current object — no
// history at all (written with history off), or a newest entry that is
// not it (a crash between a write and its keep) — the storage refuses
// the guess and the current object is still kept before it is replaced.
func testFirstWriteKeepsUnlisted(t *testing.T, b backend.Backend) {
	ctx := t.Context()
	k := keysOf(testkit.Identity(t))
	off := historyStore(t, b, k, 3, "pod-a", store.NoHistory)
	old := mustPut(t, off, "app/u", "unkept").ID.String()
	on := historyStore(t, b, k, 4, "pod-b", 0)
	first := mustPut(t, on, "app/u", "first").ID.String()
	vs, err := on.History(ctx, "app/u")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(vs), []string{first + " current", old}; !slices.Equal(got, want) {
		t.Fatalf("History after the first write with history on = %q, want %q", got, want)
	}
	// The next holding writes twice more, its listing's newest entry
	// being the current object (the guess holds).
	next := historyStore(t, b, k, 5, "pod-c", 0)
	second := mustPut(t, next, "app/u", "second").ID.String()
	third := mustPut(t, next, "app/u", "third").ID.String()
	if vs, err = next.History(ctx, "app/u"); err != nil {
		t.Fatal(err)
	}
	if got, want := ids(vs), []string{third + " current", second, first, old}; !slices.Equal(got, want) {
		t.Fatalf("History after two more writes = %q, want %q", got, want)
	}
	for i, v := range []string{"third", "second", "first", "unkept"} {
		if data, _, err := next.GetVersion(ctx, "app/u", vs[i].ID); err != nil || string(data) != v {
			t.Errorf("GetVersion(%s) = %q, %v; want %q", vs[i].ID, data, err, v)
		}
	}
	verifyClean(t, next)
}

// testPutReaderKeeps: a streamed write (the CLI's put) keeps history as
// Put does, small versions (kept by a second PUT of the bytes read back)
// and large ones (kept by a copy) alike.
func testPutReaderKeeps(t *testing.T, b backend.Backend) {
	ctx := t.Context()
	st := historyStore(t, b, keysOf(testkit.Identity(t)), 3, "pod-a", 0)
	values := []string{"small one", strings.Repeat("large ", 20<<10), "small two"}
	var written []store.Info
	for _, v := range values {
		info, err := st.PutReader(ctx, "app/stream", strings.NewReader(v), store.PutOptions{})
		if err != nil {
			t.Fatalf("PutReader(%d bytes): %v", len(v), err)
		}
		written = append(written, info)
	}
	vs, err := st.History(ctx, "app/stream")
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != len(values) {
		t.Fatalf("History after %d streamed writes = %q", len(values), ids(vs))
	}
	for i, v := range vs {
		w := len(values) - 1 - i
		if v.ID != written[w].ID || !v.Kept {
			t.Errorf("version %d = %q, want %s kept", i, ids(vs[i:i+1]), written[w].ID)
		}
		data, _, err := st.GetVersion(ctx, "app/stream", v.ID)
		if err != nil || string(data) != values[w] {
			t.Errorf("GetVersion(%s) = %d bytes, %v; want the %d bytes written", v.ID, len(data), err, len(values[w]))
		}
	}
	verifyClean(t, st)
}

func TestHistory_Local(t *testing.T) {
	t.Run("mem", func(t *testing.T) {
		runHistoryTests(t, func(*testing.T) backend.Backend { return mem.New(mem.Options{}) })
	})
	t.Run("mem-without-conditions", func(t *testing.T) {
		runHistoryTests(t, func(*testing.T) backend.Backend { return mem.New(mem.Options{NoConditionalWrites: true}) })
	})
	t.Run("fs", func(t *testing.T) {
		runHistoryTests(t, func(t *testing.T) backend.Backend {
			b, err := fs.New(t.TempDir(), fs.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.(io.Closer).Close() })
			return b
		})
	})
}

func TestHistory_Versitygw(t *testing.T) {
	srv := versitygw.Start(t)
	runHistoryTests(t, func(t *testing.T) backend.Backend { return srv.Backend(t, srv.NewBucket(t)) })
}

func TestHistory_Garage(t *testing.T) {
	srv := garage.Start(t)
	runHistoryTests(t, func(t *testing.T) backend.Backend { return srv.Backend(t, srv.NewBucket(t)) })
}

func TestHistory_GarageCluster(t *testing.T) {
	c := garageserver.StartCluster(t, 3)
	runHistoryTests(t, func(t *testing.T) backend.Backend { return c.Backend(t, c.NewBucket(t)) })
}

func testOverwriteKeepsEveryVersion(t *testing.T, b backend.Backend) {
	ctx := t.Context()
	k := keysOf(testkit.Identity(t))
	st := historyStore(t, b, k, 3, "pod-a", 0)
	var written []store.Info
	for i := range 4 {
		written = append(written, mustPut(t, st, "app/db", fmt.Sprintf("value %d", i)))
	}
	vs, err := st.History(ctx, "app/db")
	if err != nil {
		t.Fatal(err)
	}
	var want, wantKeys []string
	for i := range written {
		id := written[len(written)-1-i].ID.String()
		if i == 0 {
			id += " current"
		}
		want = append(want, id)
		wantKeys = append(wantKeys, written[i].ID.String())
	}
	if got := ids(vs); !slices.Equal(got, want) {
		t.Fatalf("History = %q, want %q", got, want)
	}
	for i, v := range vs {
		w := written[len(written)-1-i]
		if v.ID != w.ID || v.Instance != "pod-a" || v.Size != w.Size || v.Time.IsZero() {
			t.Errorf("version %d = %+v, want id %s, instance pod-a, size %d, a time", i, v, w.ID, w.Size)
		}
		data, info, err := st.GetVersion(ctx, "app/db", v.ID)
		if err != nil || string(data) != fmt.Sprintf("value %d", len(written)-1-i) || info.ID != v.ID {
			t.Errorf("GetVersion(%s) = %q, %v, %v", v.ID, data, info.ID, err)
		}
	}
	settle(t, st)
	if got := entryKeys(t, b, "app/db"); !slices.Equal(got, wantKeys) {
		t.Errorf("raw history keys = %q", got)
	}
	// The kept bytes are the object's own: the current entry is the
	// current object, byte for byte.
	if cur, kept := rawGet(t, b, store.Prefix+"app/db"), rawGet(t, b, store.Prefix+".history/app/db/"+wantKeys[3]); string(cur) != string(kept) {
		t.Errorf("the kept current version differs from the object (%d and %d bytes)", len(cur), len(kept))
	}
	// A version that was never written.
	if _, _, err := st.GetVersion(ctx, "app/db", store.VersionID{Epoch: 3, Sequence: 99}); !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "history app/db") {
		t.Errorf("GetVersion of a missing version = %v, want ErrNotFound saying how to list them", err)
	}
	// Verify opens history (bound to the name) and finds nothing wrong.
	verifyClean(t, st)
}

func verifyClean(t *testing.T, st *store.Store) {
	t.Helper()
	n := 0
	err := storeadmin.Verify(t.Context(), st, storeadmin.VerifyOptions{}, func(c storeadmin.Check) error {
		n++
		if c.Problem() {
			t.Errorf("verify: %s: %v", c.Name, c.Err)
		}
		return nil
	})

	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Error("verify checked nothing")
	}
}

func testDeleteAndUndelete(t *testing.T, b backend.Backend) {
	ctx := t.Context()
	st := historyStore(t, b, keysOf(testkit.Identity(t)), 2, "pod-a", 0)
	first := mustPut(t, st, "app/token", "first")
	last := mustPut(t, st, "app/token", "second")
	next := func(info store.Info, n uint64) string {
		id := info.ID
		id.Sequence += n
		return id.String()
	}
	if err := st.Delete(ctx, "app/token", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Get(ctx, "app/token"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get after delete = %v", err)
	}
	vs, err := st.History(ctx, "app/token")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(vs), []string{next(last, 1) + " deleted", next(last, 0), next(first, 0)}; !slices.Equal(got, want) {
		t.Fatalf("History after delete = %q, want %q", got, want)
	}
	var deleted []store.Deleted
	if err := st.ListDeleted(ctx, "app/", func(d store.Deleted) error { deleted = append(deleted, d); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(deleted) != 1 || deleted[0].Name != "app/token" || deleted[0].Last.ID != last.ID || deleted[0].By.String() != next(last, 1) || deleted[0].DeletedAt.IsZero() || deleted[0].Last.Instance != "pod-a" {
		t.Fatalf("ListDeleted = %+v", deleted)
	}
	res, err := st.Undelete(ctx, "app/token")
	if err != nil {
		t.Fatal(err)
	}
	if res.From != last.ID || res.Replaced != nil || res.Written.ID.String() != next(last, 2) {
		t.Errorf("Undelete = %+v", res)
	}
	if data, _, err := st.Get(ctx, "app/token"); err != nil || string(data) != "second" {
		t.Errorf("Get after undelete = %q, %v", data, err)
	}
	if _, err := st.Undelete(ctx, "app/token"); !errors.Is(err, store.ErrNotDeleted) {
		t.Errorf("Undelete of a live name = %v, want ErrNotDeleted", err)
	}
	deleted = nil
	if err := st.ListDeleted(ctx, "", func(d store.Deleted) error { deleted = append(deleted, d); return nil }); err != nil || len(deleted) != 0 {
		t.Errorf("ListDeleted after undelete = %+v, %v", deleted, err)
	}
	verifyClean(t, st)
}

func testRestore(t *testing.T, b backend.Backend) {
	ctx := t.Context()
	st := historyStore(t, b, keysOf(testkit.Identity(t)), 5, "pod-a", 0)
	good := mustPut(t, st, "cfg", "good")
	bad := mustPut(t, st, "cfg", "") // the empty overwrite of the issue
	res, err := st.Restore(ctx, "cfg", good.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Replaced == nil || *res.Replaced != bad.ID || res.From != good.ID {
		t.Fatalf("Restore = %+v", res)
	}
	if got := res.Written.ID; got.Compare(bad.ID) <= 0 {
		t.Errorf("the restored version %s is not newer than the one it replaced", got)
	}
	if data, _, err := st.Get(ctx, "cfg"); err != nil || string(data) != "good" {
		t.Errorf("Get after restore = %q, %v", data, err)
	}
	vs, err := st.History(ctx, "cfg")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(vs), []string{res.Written.ID.String() + " current", bad.ID.String(), good.ID.String()}; !slices.Equal(got, want) {
		t.Errorf("History after restore = %q, want %q", got, want)
	}
	if _, err := st.Restore(ctx, "cfg", store.VersionID{Epoch: 1, Sequence: 1}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Restore of a version never kept = %v, want ErrNotFound", err)
	}
}

// wantKept asserts that name's history holds exactly the entries want
// (ids, tombstones with their ".deleted") and none of gone, judging each
// key by a read of it: on a Garage cluster a listing made right after a
// DELETE can still show the deleted key (each node filters deleted keys
// out before the coordinator merges the answers, so a node not yet told
// of the delete contributes the key), while a read of the key merges
// the nodes' records and says it is gone. A listed key is allowed only
// if it is wanted, or gone and read as gone.
func wantKept(t *testing.T, b backend.Backend, name, stage string, want, gone []string) {
	t.Helper()
	key := func(e string) string { return store.Prefix + ".history/" + name + "/" + e }
	got := entryKeys(t, b, name)
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("%s: %s not listed (listed %q, want %q)", stage, w, got, want)
		}
		if rc, _, err := b.Get(t.Context(), key(w)); err != nil {
			t.Errorf("%s: %s listed but not read: %v", stage, w, err)
		} else {
			rc.Close()
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) && !slices.Contains(gone, g) {
			t.Errorf("%s: %s listed: neither wanted nor pruned (listed %q, want %q)", stage, g, got, want)
		}
	}
	absent(t, b, func() []string {
		var ks []string
		for _, g := range gone {
			ks = append(ks, key(g))
		}
		return ks
	}()...)
	for _, g := range got {
		if slices.Contains(gone, g) && !slices.Contains(want, g) {
			t.Logf("%s: the listing still showed %s, deleted (a read says it is gone)", stage, g)
		}
	}
}

func testRetentionPrunesExactly(t *testing.T, fresh func(t *testing.T) backend.Backend) {
	for _, keep := range []int{1, 2, 5} {
		t.Run(fmt.Sprintf("History=%d", keep), func(t *testing.T) {
			b := fresh(t)
			st := historyStore(t, b, keysOf(testkit.Identity(t)), 1, "pod-a", keep)
			var written []string
			for n := 1; n <= 7; n++ {
				written = append(written, mustPut(t, st, "n", fmt.Sprint(n)).ID.String())
				settle(t, st)
				cut := max(0, n-keep)
				wantKept(t, b, "n", fmt.Sprintf("after %d writes with History %d", n, keep), written[cut:], written[:cut])
			}
			// A deleted name's history is left alone by writes of others:
			// its last keep versions and the tombstone stay.
			if err := st.Delete(t.Context(), "n", store.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			vs, err := st.History(t.Context(), "n")
			if err != nil || len(vs) == 0 || !vs[0].Deleted {
				t.Fatalf("History after the delete = %q, %v", ids(vs), err)
			}
			tomb := vs[0].ID.String() + ".deleted"
			for i := range 3 {
				mustPut(t, st, "other", fmt.Sprint(i))
			}
			settle(t, st)
			cut := len(written) - keep
			wantKept(t, b, "n", "after writes of another name", append(slices.Clone(written[cut:]), tomb), written[:cut])
			// Writing it again prunes as usual: the tombstone goes with
			// the versions older than what stays.
			var again []string
			for i := range keep + 1 {
				again = append(again, mustPut(t, st, "n", fmt.Sprint("again", i)).ID.String())
			}
			settle(t, st)
			wantKept(t, b, "n", "after rewriting", again[1:], append(append(slices.Clone(written), tomb), again[0]))
		})
	}
}

func testTakeoverContinues(t *testing.T, b backend.Backend) {
	ctx := t.Context()
	k := keysOf(testkit.Identity(t))
	a := historyStore(t, b, k, 7, "pod-a", 0)
	var aIDs []string
	for i := range 3 {
		aIDs = append(aIDs, mustPut(t, a, "app/s", fmt.Sprint("a", i)).ID.String())
	}
	// A's last write was never kept: it died between the write and the
	// keep.
	settle(t, a)
	if err := b.Delete(ctx, store.Prefix+".history/app/s/"+aIDs[2], backend.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// B takes over: a new process (a new connection) with the next epoch,
	// its sequence starting again.
	bst := historyStore(t, b, k, 8, "pod-b", 0)
	b0 := mustPut(t, bst, "app/s", "b0").ID.String()
	b1 := mustPut(t, bst, "app/s", "b1").ID.String()
	vs, err := bst.History(ctx, "app/s")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(vs), []string{b1 + " current", b0, aIDs[2], aIDs[1], aIDs[0]}; !slices.Equal(got, want) {
		t.Fatalf("History after takeover = %q, want %q", got, want)
	}
	for _, v := range vs {
		want := map[uint64]string{7: "pod-a", 8: "pod-b"}[v.ID.Epoch]
		if v.Instance != want {
			t.Errorf("version %s: instance %q, want %q", v.ID, v.Instance, want)
		}
	}
	// A's versions read back through B, the repaired one included.
	for i, id := range aIDs {
		vid, _ := store.ParseVersionID(id)
		if data, _, err := bst.GetVersion(ctx, "app/s", vid); err != nil || string(data) != fmt.Sprint("a", i) {
			t.Errorf("GetVersion(%s) = %q, %v", id, data, err)
		}
	}
	verifyClean(t, bst)
}

func testNotVersioned(t *testing.T, b backend.Backend) {
	ctx := t.Context()
	k := keysOf(testkit.Identity(t))
	st := historyStore(t, b, k, 1, "pod-a", 0)
	// Reserved names through the internal view of a fenced view.
	in := storeadmin.Internal(st)
	for range 2 {
		if _, err := in.Put(ctx, ".reserved", []byte("x"), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// An unfenced view.
	plain, err := store.Connect(ctx, b, k, store.ConnectOptions{Options: store.Options{Logger: quiet()}})
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, plain, "plain", "1")
	mustPut(t, plain, "plain", "2")
	// History off.
	off := historyStore(t, b, k, 2, "pod-b", store.NoHistory)
	mustPut(t, off, "off", "1")
	mustPut(t, off, "off", "2")
	if err := off.Delete(ctx, "off", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, key := range rawKeys(t, b) {
		if strings.Contains(key, ".history/") {
			t.Errorf("kept %s: nothing here keeps history", key)
		}
	}
	u, err := storeadmin.HistoryUsageOf(ctx, st)
	if err != nil || u != (storeadmin.HistoryUsage{}) {
		t.Errorf("HistoryUsage = %+v, %v, want none", u, err)
	}
	// A later fenced write of the unfenced name keeps what it replaces
	// first (its id from its modification time: 0.<ms>), then itself.
	mustPut(t, st, "plain", "3")
	vs, err := st.History(ctx, "plain")
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 || vs[1].ID.Epoch != 0 || !vs[1].Kept || !vs[0].Current {
		t.Fatalf("History of a name first written unfenced = %q", ids(vs))
	}
	if data, _, err := st.GetVersion(ctx, "plain", vs[1].ID); err != nil || string(data) != "2" {
		t.Errorf("the unfenced version = %q, %v", data, err)
	}
	u, err = storeadmin.HistoryUsageOf(ctx, st)
	if err != nil || u.Names != 1 || u.Versions != 2 || u.Bytes <= 0 {
		t.Errorf("HistoryUsage = %+v, %v", u, err)
	}
}

// verifyChecks runs Verify and returns its checks by name.
func verifyChecks(t *testing.T, st *store.Store) map[string]storeadmin.Check {
	t.Helper()
	out := map[string]storeadmin.Check{}
	if err := storeadmin.Verify(t.Context(), st, storeadmin.VerifyOptions{}, func(c storeadmin.Check) error { out[c.Name] = c; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// strictStore is a reader of b's store with RejectRollback.
func strictStore(t *testing.T, b backend.Backend, k store.Keys) *store.Store {
	t.Helper()
	st, err := store.Connect(t.Context(), b, k, store.ConnectOptions{Options: store.Options{Logger: quiet(), RejectRollback: true}})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// putBackScene writes app/key twice ("old", then "new") through a
// fenced view of epoch 4 and then puts the first genuine object back, as
// a writer of the bucket would. It returns the view, the keys, both
// writes and the put-back bytes.
func putBackScene(t *testing.T, b backend.Backend) (st *store.Store, k store.Keys, old, cur store.Info, oldBytes []byte) {
	t.Helper()
	k = keysOf(testkit.Identity(t))
	st = historyStore(t, b, k, 4, "pod-a", 0)
	old = mustPut(t, st, "app/key", "old")
	oldBytes = rawGet(t, b, store.Prefix+"app/key")
	cur = mustPut(t, st, "app/key", "new")
	settle(t, st)
	if _, err := b.Put(t.Context(), store.Prefix+"app/key", oldBytes, backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	return st, k, old, cur, oldBytes
}

// Issue #21: at 0ac0f30 an older genuine object put back by a writer of
// the bucket was served as current and verify passed.
func testPutBackPrevious(t *testing.T, b backend.Backend) {
	ctx := t.Context()
	st, k, old, cur, _ := putBackScene(t, b)
	// Without RejectRollback Get is unchanged: it serves what is there.
	if data, _, err := st.Get(ctx, "app/key"); err != nil || string(data) != "old" {
		t.Fatalf("Get = %q, %v", data, err)
	}
	c := verifyChecks(t, st)["app/key"]
	current, newer, deleted, ok := storeadmin.PutBackOf(c.PutBack)
	if !ok || current != old.ID || newer != cur.ID || deleted || !c.Problem() || !errors.Is(c.PutBack, store.ErrPutBack) {
		t.Fatalf("verify of the put-back object = %+v, want PutBack naming %s and %s", c.PutBack, old.ID, cur.ID)
	}
	if msg := c.PutBack.Error(); !strings.Contains(msg, "restore app/key "+cur.ID.String()) {
		t.Errorf("PutBack does not say how to restore: %s", msg)
	}
	_, _, err := strictStore(t, b, k).Get(ctx, "app/key")
	var pb *store.PutBackError
	if !errors.Is(err, store.ErrPutBack) || !errors.As(err, &pb) || pb.Newer != cur.ID {
		t.Fatalf("strict Get = %v, want a PutBackError naming %s", err, cur.ID)
	}
	// Restoring the newer version repairs it: verify and strict Get pass.
	if _, err := st.Restore(ctx, "app/key", cur.ID); err != nil {
		t.Fatal(err)
	}
	if data, _, err := strictStore(t, b, k).Get(ctx, "app/key"); err != nil || string(data) != "new" {
		t.Errorf("strict Get after restore = %q, %v", data, err)
	}
	verifyClean(t, st)
}

func testPutBackDeleted(t *testing.T, b backend.Backend) {
	ctx := t.Context()
	k := keysOf(testkit.Identity(t))
	st := historyStore(t, b, k, 4, "pod-a", 0)
	mustPut(t, st, "app/revoked", "token")
	sealed := rawGet(t, b, store.Prefix+"app/revoked")
	if err := st.Delete(ctx, "app/revoked", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctx, store.Prefix+"app/revoked", sealed, backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	c := verifyChecks(t, st)["app/revoked"]
	if _, _, deleted, ok := storeadmin.PutBackOf(c.PutBack); !ok || !deleted {
		t.Fatalf("verify of a deleted object brought back = %+v", c.PutBack)
	}
	if _, _, err := strictStore(t, b, k).Get(ctx, "app/revoked"); !errors.Is(err, store.ErrPutBack) {
		t.Fatalf("strict Get = %v, want ErrPutBack", err)
	}
}

// An entry key is only a key: one made up to look newer, holding an
// older genuine version, refuses nothing and is reported as misnamed.
func testForgedEntryKey(t *testing.T, b backend.Backend) {
	ctx := t.Context()
	k := keysOf(testkit.Identity(t))
	st := historyStore(t, b, k, 4, "pod-a", 0)
	mustPut(t, st, "app/x", "one")
	sealed := rawGet(t, b, store.Prefix+"app/x")
	mustPut(t, st, "app/x", "two")
	settle(t, st)
	if _, err := b.Put(ctx, store.Prefix+".history/app/x/99.1", sealed, backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if data, _, err := strictStore(t, b, k).Get(ctx, "app/x"); err != nil || string(data) != "two" {
		t.Fatalf("strict Get with a forged entry key = %q, %v, want the current value", data, err)
	}
	checks := verifyChecks(t, st)
	if c := checks[".history/app/x/99.1"]; c.Err == nil || !errors.Is(c.Err, store.ErrUnreadable) || !strings.Contains(c.Err.Error(), "misnamed") {
		t.Errorf("verify of the forged entry = %v, want misnamed", c.Err)
	}
	if c := checks["app/x"]; c.Problem() {
		t.Errorf("verify of the current object = %+v, want no problem", c)
	}
}
