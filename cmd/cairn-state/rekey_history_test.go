package main

import (
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/storeadmin"
)

// Issue #21: a rekey re-seals history, or the retired key would keep
// reading it. The library's test runs on mem; this one runs the CLI as a
// process on fs, versitygw and Garage: every kept version and tombstone
// is re-sealed with its id and its writer kept, the new key reads each
// version, and the retired key opens none of it.
func TestRekey_CLI_ResealsHistory_RetiredKeyOpensNone(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		oldID, _ := tg.keygen(t, "old.txt")
		tg.cli(t, nil, "init", "--identity", oldID).must(t, exitOK)
		for _, v := range []string{"a1", "a2", "a3"} {
			tg.cli(t, []byte(v), "put", "app/a", "--identity", oldID).must(t, exitOK)
		}
		tg.cli(t, []byte("b1"), "put", "app/b", "--identity", oldID).must(t, exitOK)
		tg.cli(t, nil, "rm", "app/b", "--identity", oldID).must(t, exitOK)
		versions := func(id, name string) []string {
			t.Helper()
			var out []string
			for _, v := range decode[[]keptVersionDoc](t, tg.cli(t, nil, "history", name, "--identity", id, "--json").must(t, exitOK)) {
				s := v.Version
				if v.Deleted {
					s += " deleted"
				}
				out = append(out, s)
			}
			return out
		}
		beforeA, beforeB := versions(oldID, "app/a"), versions(oldID, "app/b")
		instances := func(id, name string) []string {
			t.Helper()
			var out []string
			for _, v := range decode[[]keptVersionDoc](t, tg.cli(t, nil, "history", name, "--identity", id, "--json").must(t, exitOK)) {
				out = append(out, v.Instance)
			}
			return out
		}
		if got := instances(oldID, "app/a"); len(got) != 3 || got[0] != instanceID() || got[2] != instanceID() {
			t.Fatalf("instances before the rekey: %q", got)
		}
		m, _ := storeadmin.Manifest(tg.store(t, oldID))
		if opened, history := openedBy(t, tg, oldID, m.ID); history != 5 || len(opened) < history {
			t.Fatalf("before the rekey the key opens %d objects (%d of history), want every one", len(opened), history)
		}

		newID, _ := tg.keygen(t, "new.txt")
		tg.cli(t, nil, "rekey", "--identity", newID, "--old-identity", oldID).must(t, exitOK)

		// The same versions, each read with the new key, each still
		// named after the put that wrote it, not after the rekey.
		if a, b := versions(newID, "app/a"), versions(newID, "app/b"); !slices.Equal(a, beforeA) || !slices.Equal(b, beforeB) {
			t.Fatalf("history after the rekey: %q and %q, before %q and %q", a, b, beforeA, beforeB)
		}
		for _, n := range []string{"app/a", "app/b"} {
			if got := instances(newID, n); slices.ContainsFunc(got, func(s string) bool { return s != instanceID() }) {
				t.Errorf("%s after the rekey: instances %q, want the put's %q on each", n, got, instanceID())
			}
		}
		for i, v := range beforeA {
			want := []string{"a3", "a2", "a1"}[i]
			if r := tg.cli(t, nil, "get", "--version", v, "app/a", "--identity", newID).must(t, exitOK); r.stdout != want {
				t.Errorf("get --version %s with the new key = %q, want %q", v, r.stdout, want)
			}
		}
		if r := tg.cli(t, nil, "get", "--version", beforeB[1], "app/b", "--identity", newID).must(t, exitOK); r.stdout != "b1" {
			t.Errorf("the deleted name's kept version with the new key = %q", r.stdout)
		}
		tg.cli(t, nil, "verify", "--identity", newID).must(t, exitOK)

		// The retired key: refused by the CLI, and it opens no object
		// under the store's prefix, history included, where before the
		// rekey it opened every one.
		tg.cli(t, nil, "get", "--version", beforeA[1], "app/a", "--identity", oldID).must(t, exitNotMember)
		opened, history := openedBy(t, tg, oldID, m.ID)
		if len(opened) != 0 {
			t.Errorf("the retired key opens %q after the rekey", opened)
		}
		// 4 versions of app/a (3) and app/b (1), app/b's tombstone.
		if history != 5 {
			t.Errorf("checked %d history objects, want 5", history)
		}
	})
}

// openedBy returns the objects under the target's store prefix (the lock
// aside) that the identities in file open, each bound as the store binds
// it (a kept version to its name, all to store id), and how many history
// objects there are.
func openedBy(t *testing.T, tg *target, file string, id envelope.StoreID) (opened []string, history int) {
	t.Helper()
	ctx := t.Context()
	env, err := envelope.New(mustIdentities(t, file), nil, envelope.Options{StoreID: id})
	if err != nil {
		t.Fatal(err)
	}
	prefix := tg.key("")
	err = tg.raw.List(ctx, prefix, func(o backend.Object) error {
		name := strings.TrimPrefix(o.Key, prefix)
		if strings.HasPrefix(name, ".lock") {
			return nil
		}
		rc, _, err := tg.raw.Get(ctx, o.Key)
		if err != nil {
			return err
		}
		sealed, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return err
		}
		bound := name
		if rest, ok := strings.CutPrefix(name, ".history/"); ok {
			history++
			if !strings.HasSuffix(rest, ".deleted") && !strings.HasPrefix(rest, ".") {
				bound = rest[:strings.LastIndexByte(rest, '/')]
			}
		}
		if _, err := env.Open(bound, sealed); err == nil {
			opened = append(opened, name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return opened, history
}
