package store_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/store"
)

// absent asserts that none of keys exists, judged by a read of each: a
// listing right after a delete may still show the deleted key on a Garage
// cluster (see testRetentionPrunesExactly), a read of the key does not.
func absent(t *testing.T, b backend.Backend, keys ...string) {
	t.Helper()
	for _, k := range keys {
		rc, _, err := b.Get(t.Context(), k)
		if err == nil {
			rc.Close()
			t.Errorf("%s still exists", k)
		} else if !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("read %s: %v", k, err)
		}
	}
}

// historyKeysOf is the raw keys of name's listed history entries.
func historyKeysOf(t *testing.T, b backend.Backend, name string) []string {
	t.Helper()
	var out []string
	for _, e := range entryKeys(t, b, name) {
		out = append(out, store.Prefix+".history/"+name+"/"+e)
	}
	return out
}

// Purge forgets a name on purpose (a leaked secret rotated away): the
// object and every version and tombstone history keeps of it, and
// nothing of any other name, deeper names included.
func testPurge(t *testing.T, b backend.Backend) {
	ctx := t.Context()
	k := keysOf(testkit.Identity(t))
	st := historyStore(t, b, k, 3, "pod-a", 0)
	for i := range 3 {
		mustPut(t, st, "app/leaked", fmt.Sprint("secret ", i))
	}
	mustPut(t, st, "app/other", "stays")
	settle(t, st)
	kept := historyKeysOf(t, b, "app/leaked")
	if len(kept) != 3 {
		t.Fatalf("before the purge: %q kept, want 3 versions", kept)
	}
	n, err := st.Purge(ctx, "app/leaked")
	if err != nil || n != 3 {
		t.Fatalf("Purge = %d, %v; want 3 history objects removed", n, err)
	}
	absent(t, b, append(kept, store.Prefix+"app/leaked")...)
	if _, _, err := st.Get(ctx, "app/leaked"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get after the purge = %v, want ErrNotFound", err)
	}
	if vs, err := st.History(ctx, "app/other"); err != nil || len(vs) != 1 || !vs[0].Kept {
		t.Errorf("the other name's history after the purge = %q, %v", ids(vs), err)
	}

	// A deleted name (no object, its versions and tombstone kept) is
	// purged too: what `rm --purge` of a name already removed does. A
	// deeper name keeps its object and history (written after the
	// delete: versitygw cannot hold an object and a deeper one at once).
	mustPut(t, st, "app/revoked", "one")
	mustPut(t, st, "app/revoked", "two")
	if err := st.Delete(ctx, "app/revoked", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	child := mustPut(t, st, "app/revoked/child", "stays")
	settle(t, st)
	kept = historyKeysOf(t, b, "app/revoked")
	if n, err := st.Purge(ctx, "app/revoked"); err != nil || n != 3 || len(kept) != 3 {
		t.Fatalf("Purge of a deleted name = %d, %v (listed %q); want 3: two versions and a tombstone", n, err, kept)
	}
	absent(t, b, kept...)
	if _, err := st.Undelete(ctx, "app/revoked"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Undelete after the purge = %v, want ErrNotFound", err)
	}
	if data, _, err := st.GetVersion(ctx, "app/revoked/child", child.ID); err != nil || string(data) != "stays" {
		t.Errorf("the deeper name's kept version after the purge = %q, %v", data, err)
	}
	if data, _, err := st.Get(ctx, "app/revoked/child"); err != nil || string(data) != "stays" {
		t.Errorf("the deeper name after the purge = %q, %v", data, err)
	}

	// Nothing to purge.
	if _, err := st.Purge(ctx, "app/never"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Purge of a name never written = %v, want ErrNotFound", err)
	}

	// Fenced like every write: a view whose lock is lost purges nothing.
	mustPut(t, st, "app/held", "v")
	kept = historyKeysOf(t, b, "app/held")
	plain, err := store.Connect(ctx, b, k, store.ConnectOptions{Options: store.Options{Logger: quiet()}})
	if err != nil {
		t.Fatal(err)
	}
	lost := &holderFence{switchFence: switchFence{epoch: 3}, instance: "pod-a"}
	lost.trip(errLockLost)
	if _, err := storeadmin.WithFence(plain, lost).Purge(ctx, "app/held"); !errors.Is(err, store.ErrFenced) || !errors.Is(err, errLockLost) {
		t.Fatalf("Purge through a lost fence = %v, want ErrFenced", err)
	}
	for _, key := range append(kept, store.Prefix+"app/held") {
		rc, _, err := b.Get(ctx, key)
		if err != nil {
			t.Errorf("after a refused purge, %s: %v", key, err)
			continue
		}
		rc.Close()
	}
}
