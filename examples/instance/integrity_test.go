package main

// Issue #24's findings against the store's integrity, as real processes:
// the example app and the operator's cairn-state on one store, with the
// bucket written behind their backs as someone who can write it but holds
// no key would.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/storemeta"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/store"
)

func TestStoreIntegrity(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		t.Run("ManifestDeleted_RefusedEverywhere_NothingCreated", func(t *testing.T) { testManifestDeleted(t, tg) })
		t.Run("NeverCreatedWhereObjectsAre", func(t *testing.T) { testNeverCreatedWhereObjectsAre(t, tg) })
		t.Run("OldManifestPutBackAfterARekey_Refused", func(t *testing.T) { testOldManifestBack(t, tg) })
		t.Run("StoreSwapped_PinnedIdExitsFive", func(t *testing.T) { testStoreSwapped(t, tg) })
		t.Run("MigrationLogDeleted_RefusedNotRerun", func(t *testing.T) { testMigrationLogDeleted(t, tg) })
		t.Run("RekeyWithAnOldKeyForgery_SaysRotationDoesNotUndoIt", func(t *testing.T) { testRekeyForgery(t, tg) })
	})
}

// key is the backend key of a state name in the world's store.
func (w *world) key(name string) string {
	if w.root == "" {
		return store.Prefix + name
	}
	return w.root + "/" + store.Prefix + name
}

// rawPut writes bytes under a state name, bypassing the library.
func (w *world) rawPut(t *testing.T, name string, data []byte) {
	t.Helper()
	if _, err := w.raw.Put(context.Background(), w.key(name), data, backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

// rawGet reads a state name's stored bytes, bypassing the library.
func (w *world) rawGet(t *testing.T, name string) []byte {
	t.Helper()
	return testkit.Read(t, w.raw, w.key(name))
}

// recipientOf is the recipient of an identity file.
func recipientOf(t *testing.T, file string) string {
	t.Helper()
	ids, err := envelope.LoadIdentityFile(file)
	if err != nil {
		t.Fatal(err)
	}
	r, err := envelope.RecipientOf(ids[0])
	if err != nil {
		t.Fatal(err)
	}
	text, err := envelope.RecipientString(r)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// rawDelete removes a state name, bypassing the library.
func (w *world) rawDelete(t *testing.T, name string) {
	t.Helper()
	if err := w.raw.Delete(context.Background(), w.key(name), backend.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// allRaw is every key under the world's prefix with its version, the
// lock's objects included.
func (w *world) allRaw(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := w.raw.List(context.Background(), w.key(""), func(o backend.Object) error {
		out[o.Key] = o.Version
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// bootAndStop boots the app on the world's store and shuts it down.
func bootAndStop(t *testing.T, w *world, env ...string) {
	t.Helper()
	p := w.start(t, "", "app", env)
	ready(t, p, "app")
	shutdown(t, p)
}

// storeID is the id of the world's store, as the CLI's verify reports it.
func (w *world) storeID(t *testing.T) string {
	t.Helper()
	r := w.cairnState(t, "", "verify", "--json", "--identity", w.identity)
	var doc struct {
		Store struct {
			ID string `json:"id"`
		} `json:"store"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || doc.Store.ID == "" {
		t.Fatalf("verify --json: %v\n%s\n%s", err, r.stdout, r.stderr)
	}
	return doc.Store.ID
}

// Finding 1: the manifest deleted and 16 junk objects added in front of
// the real ones. 0ac0f30 re-created the store on the next write, read the
// planted objects on read paths and said "no manifest yet".
func testManifestDeleted(t *testing.T, tg target) {
	w := newWorld(t, tg)
	bootAndStop(t, w)
	w.rawDelete(t, storemeta.ManifestName)
	for i := range 16 {
		w.rawPut(t, fmt.Sprintf("0pad/%02d", i), []byte("junk"))
	}
	before := w.allRaw(t)
	const missing = "the store's manifest is missing: restore it from a backup"

	p := w.start(t, "", "app", nil)
	if code := p.Wait(t, exitTimeout); code != 1 || !strings.Contains(p.Stderr.String(), missing) {
		t.Errorf("boot without a manifest: exit %d, want 1 saying %q\n%s", code, missing, p.Stderr.String())
	}
	for _, args := range [][]string{
		{"ls"}, {"get", "boots"}, {"verify"}, {"lock", "status"}, {"migrate", "status"},
		{"put", "x"}, {"rm", "boots"}, {"rekey"}, {"init"},
	} {
		r := w.cairnState(t, "v", append(args, "--identity", w.identity)...)
		if r.code != 1 || !strings.Contains(r.stderr, missing) {
			t.Errorf("cairn-state %v: exit %d, want 1 saying %q\n%s", args, r.code, missing, r.stderr)
		}
	}
	if after := w.allRaw(t); !maps.Equal(before, after) {
		t.Errorf("something was written where the manifest is missing: %v → %v", before, after)
	}
}

// A store is created only where .cairn-state/ holds nothing: one object of
// any kind there and no manifest, and neither the app nor the CLI makes a
// store of it.
func testNeverCreatedWhereObjectsAre(t *testing.T, tg target) {
	w := newWorld(t, tg)
	w.rawPut(t, "notes/readme.txt", []byte("someone's file"))
	before := w.allRaw(t)
	p := w.start(t, "", "app", nil)
	if code := p.Wait(t, exitTimeout); code != 1 {
		t.Errorf("boot where an object is: exit %d, want 1\n%s", code, p.Stderr.String())
	}
	for _, args := range [][]string{{"init"}, {"put", "x"}, {"rekey"}} {
		if r := w.cairnState(t, "v", append(args, "--identity", w.identity)...); r.code != 1 {
			t.Errorf("cairn-state %v where an object is: exit %d, want 1\n%s", args, r.code, r.stderr)
		}
	}
	if after := w.allRaw(t); !maps.Equal(before, after) {
		t.Errorf("a store was made where an object is: %v → %v", before, after)
	}
}

// Finding 2: store {A, R}, rekeyed to {A} because R leaked, then the old
// manifest put back. On 0ac0f30 A kept working and sealed every new object
// to {A, R} again. Now every object the rekey re-sealed carries the newer
// generation, and reading one refuses the old manifest, naming both.
func testOldManifestBack(t *testing.T, tg target) {
	w := newWorld(t, tg)
	leaked := newKey(t)
	leakedRecipient := recipientOf(t, leaked)
	bootAndStop(t, w, "CAIRN_STATE_RECIPIENTS="+leakedRecipient)
	old := w.rawGet(t, storemeta.ManifestName)
	r := w.cairnState(t, "", "rekey", "--identity", w.identity).must(t, 0)
	if !strings.Contains(r.stdout, "manifest generation 2 → 3") {
		t.Errorf("rekey:\n%s", r.stdout)
	}
	w.rawPut(t, storemeta.ManifestName, old)
	// Detected when an object is read, with the lock held: only the lock's
	// own objects may change.
	before := w.snapshot(t)

	p := w.start(t, "", "app", nil)
	if code := p.Wait(t, exitTimeout); code != 1 || !strings.Contains(p.Stderr.String(), "rolled back") ||
		!strings.Contains(p.Stderr.String(), "generation 3") || !strings.Contains(p.Stderr.String(), "generation 2") {
		t.Errorf("boot on the old manifest: exit %d, want 1 saying it was rolled back, naming generations 3 and 2\n%s", code, p.Stderr.String())
	}
	v := w.cairnState(t, "", "verify", "--identity", w.identity).must(t, 1)
	if !strings.Contains(v.stdout, "FAIL boots: manifest rolled back") || !strings.Contains(v.stdout, "generation 3") {
		t.Errorf("verify does not report the rolled-back manifest:\n%s", v.stdout)
	}
	if after := w.snapshot(t); !maps.Equal(before, after) {
		t.Errorf("the refused boot wrote: %v → %v", before, after)
	}
}

// Finding 3: a whole store swapped for another that shares the key. The
// pinned id refuses it with exit 5, touching nothing; a pinned store that
// is not there at all is not created (exit 6).
func testStoreSwapped(t *testing.T, tg target) {
	prod, staging := newWorld(t, tg), newWorld(t, tg)
	staging.identity = prod.identity
	bootAndStop(t, prod)
	bootAndStop(t, staging)
	bootAndStop(t, staging)
	prodID := prod.storeID(t)
	// The bucket writer copies staging over prod, manifest included.
	for key := range staging.allRaw(t) {
		name := strings.TrimPrefix(key, staging.key(""))
		prod.rawPut(t, name, staging.rawGet(t, name))
	}
	before := prod.allRaw(t)
	pin := "CAIRN_STATE_STORE_ID=" + prodID
	p := prod.start(t, "", "app", []string{pin})
	if code := p.Wait(t, exitTimeout); code != 5 || !strings.Contains(p.Stderr.String(), "is pinned") || !strings.Contains(p.Stderr.String(), prodID) {
		t.Errorf("pinned boot on the swapped store: exit %d, want 5 naming the pinned id\n%s", code, p.Stderr.String())
	}
	for _, args := range [][]string{{"get", "boots"}, {"put", "x"}, {"ls"}} {
		r := prod.cairnState(t, "v", append(args, "--identity", prod.identity, "--store-id", prodID)...)
		if r.code != 5 || !strings.Contains(r.stderr, "is pinned") {
			t.Errorf("cairn-state --store-id %v on the swapped store: exit %d, want 5\n%s", args, r.code, r.stderr)
		}
	}
	if after := prod.allRaw(t); !maps.Equal(before, after) {
		t.Errorf("a pinned refusal wrote: %v → %v", before, after)
	}
	// Unpinned, the copy is served (what the pin is for): staging's count.
	u := prod.start(t, "", "app", nil)
	if _, boots := ready(t, u, "app"); boots != 3 {
		t.Errorf("unpinned boot on the swapped store: boots=%d, want staging's 3", boots)
	}
	shutdown(t, u)

	empty := newWorld(t, tg)
	e := empty.start(t, "", "app", []string{pin})
	if code := e.Wait(t, exitTimeout); code != 6 {
		t.Errorf("pinned boot on an empty location: exit %d, want 6\n%s", code, e.Stderr.String())
	}
	if got := empty.allRaw(t); len(got) != 0 {
		t.Errorf("a pinned boot created %v", got)
	}
}

// Finding 4: the migration log deleted. 0ac0f30 took the store for a fresh
// one and ran every migration again, the seed migration resetting what it
// seeded. Now the boot is refused, naming the log, and nothing is reset.
func testMigrationLogDeleted(t *testing.T, tg target) {
	w := newWorld(t, tg)
	bootAndStop(t, w)
	w.cairnState(t, "changed by the operator", "put", "settings/greeting", "--identity", w.identity).must(t, 0)
	w.rawDelete(t, ".migrations")
	// Detected by the migrations, with the lock held: only the lock's own
	// objects may change.
	before := w.snapshot(t)

	p := w.start(t, "", "app", nil)
	if code := p.Wait(t, exitTimeout); code != 1 || !strings.Contains(p.Stderr.String(), ".migrations") || !strings.Contains(p.Stderr.String(), "migration log is missing") {
		t.Errorf("boot without its migration log: exit %d, want 1 naming .migrations\n%s", code, p.Stderr.String())
	}
	if got := w.cairnState(t, "", "get", "settings/greeting", "--identity", w.identity).must(t, 0).stdout; got != "changed by the operator" {
		t.Errorf("settings/greeting = %q: the seed migration ran again", got)
	}
	if r := w.cairnState(t, "", "migrate", "status", "--identity", w.identity); r.code != 1 || !strings.Contains(r.stderr, ".migrations") {
		t.Errorf("migrate status without the log: exit %d\n%s", r.code, r.stderr)
	}
	if after := w.snapshot(t); !maps.Equal(before, after) {
		t.Errorf("the refused boot wrote: %v → %v", before, after)
	}
}

// Finding 5: a rekey away from a leaked key re-authenticates whatever that
// key forged. Inherent to rotation; the run now says so, naming how many
// objects it carried over, and what to do.
func testRekeyForgery(t *testing.T, tg target) {
	w := newWorld(t, tg)
	bootAndStop(t, w)
	// The leaked key writes behind the lock's back: a genuine-looking
	// object, as the holder of the key can.
	w.cairnState(t, "mallory", "put", "config/admins", "--identity", w.identity).must(t, 0)
	newKeyFile := newKey(t)
	r := w.cairnState(t, "", "rekey", "--json", "--identity", newKeyFile, "--old-identity", w.identity).must(t, 0)
	var doc struct {
		Reauthenticated []string `json:"reauthenticated"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, n := range doc.Reauthenticated {
		found = found || n == "config/admins"
	}
	if !found {
		t.Errorf("rekey --json does not name the object only the retired key authenticated: %+v\n%s", doc, r.stdout)
	}
	for _, want := range []string{"authenticated only by a retired key", "does not undo a forgery", "recovery export"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("rekey does not say %q:\n%s", want, r.stderr)
		}
	}
}
