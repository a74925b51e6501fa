package main

import (
	"bytes"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// Issue #21: an overwrite or a delete through the CLI is recoverable. At
// 0ac0f30 `cat missing.txt | cairn-state put --allow-empty NAME` (then an
// empty put) replaced the value for good, and rm removed it for good.
func TestHistory_CLI_ListGetRestoreRmUndelete(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		id, _ := tg.keygen(t, "id.txt")
		tg.cli(t, nil, "init", "--identity", id).must(t, exitOK)
		put := func(v string, extra ...string) putDoc {
			args := append([]string{"put", "app/db-password", "--identity", id, "--json"}, extra...)
			return decode[putDoc](t, tg.cli(t, []byte(v), args...).must(t, exitOK))
		}
		put("hunter2")
		put("", "--allow-empty") // the bad overwrite
		// history --json: newest first, each with version, time,
		// instance, epoch and size.
		hist := decode[[]keptVersionDoc](t, tg.cli(t, nil, "history", "app/db-password", "--identity", id, "--json").must(t, exitOK))
		if len(hist) != 2 || !hist[0].Current || hist[1].Current || hist[0].Epoch <= hist[1].Epoch {
			t.Fatalf("history --json = %+v", hist)
		}
		for _, v := range hist {
			if v.Version != fmt.Sprintf("%d.%d", v.Epoch, v.Sequence) || v.Time.IsZero() || v.Instance != instanceID() || v.Size <= 0 || !v.Kept {
				t.Errorf("history entry %+v", v)
			}
		}
		good, bad := hist[1].Version, hist[0].Version
		table := tg.cli(t, nil, "history", "app/db-password", "--identity", id).must(t, exitOK)
		lines := strings.Split(strings.TrimSpace(table.stdout), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "VERSION") || !strings.HasPrefix(lines[1], bad+" ") || !strings.Contains(lines[1], "current") || !strings.HasPrefix(lines[2], good+" ") {
			t.Errorf("history table:\n%s", table.stdout)
		}
		// get --version reads the old value.
		if r := tg.cli(t, nil, "get", "--version", good, "app/db-password", "--identity", id).must(t, exitOK); r.stdout != "hunter2" {
			t.Errorf("get --version %s = %q", good, r.stdout)
		}
		if r := tg.cli(t, nil, "get", "--version", "1.999", "app/db-password", "--identity", id).must(t, exitFail); !strings.Contains(r.stderr, "history app/db-password") {
			t.Errorf("get of a version never kept:\n%s", r)
		}
		tg.cli(t, nil, "get", "--version", "x", "app/db-password", "--identity", id).must(t, exitUsage)
		// restore takes the lock and says what it replaced.
		r := tg.cli(t, nil, "restore", "app/db-password", good, "--identity", id).must(t, exitOK)
		if !strings.Contains(r.stdout, "restored app/db-password to "+good) || !strings.Contains(r.stdout, "the version it replaced, "+bad+", is kept") {
			t.Errorf("restore:\n%s", r)
		}
		if r := tg.cli(t, nil, "get", "app/db-password", "--identity", id).must(t, exitOK); r.stdout != "hunter2" {
			t.Errorf("get after restore = %q", r.stdout)
		}
		// rm says how to undo it; ls --deleted lists it.
		r = tg.cli(t, nil, "rm", "app/db-password", "--identity", id).must(t, exitOK)
		hist = decode[[]keptVersionDoc](t, tg.cli(t, nil, "history", "app/db-password", "--identity", id, "--json").must(t, exitOK))
		if !hist[0].Deleted || len(hist) != 4 {
			t.Fatalf("history after rm = %+v", hist)
		}
		last := hist[1].Version
		if want := "cairn-state restore app/db-password " + last + " brings it back"; !strings.Contains(r.stdout, want) {
			t.Errorf("rm does not say %q:\n%s", want, r)
		}
		del := decode[[]deletedDoc](t, tg.cli(t, nil, "ls", "--deleted", "--json", "--identity", id).must(t, exitOK))
		if len(del) != 1 || del[0].Name != "app/db-password" || del[0].LastVersion != last || del[0].DeletedAt == nil {
			t.Errorf("ls --deleted --json = %+v", del)
		}
		if r := tg.cli(t, nil, "ls", "--deleted", "--identity", id).must(t, exitOK); !strings.Contains(r.stdout, "app/db-password") || !strings.Contains(r.stdout, last) {
			t.Errorf("ls --deleted:\n%s", r)
		}
		// Undelete: restore the version rm printed.
		doc := decode[restoreDoc](t, tg.cli(t, nil, "restore", "app/db-password", last, "--identity", id, "--json").must(t, exitOK))
		if doc.Restored != last || doc.Replaced != nil || doc.Version == "" {
			t.Errorf("restore --json of a deleted name = %+v", doc)
		}
		if r := tg.cli(t, nil, "get", "app/db-password", "--identity", id).must(t, exitOK); r.stdout != "hunter2" {
			t.Errorf("get after undelete = %q", r.stdout)
		}
		// ls --all shows history's size.
		all := decode[lsDoc](t, tg.cli(t, nil, "ls", "--all", "--json", "--identity", id).must(t, exitOK))
		if all.History == nil || all.History.Names != 1 || all.History.Versions != 4 || all.History.Tombstones != 1 || all.History.Bytes <= 0 {
			t.Errorf("ls --all --json history = %+v", all.History)
		}
		if r := tg.cli(t, nil, "ls", "--all", "--identity", id).must(t, exitOK); !strings.Contains(r.stdout, "history: 4 versions of 1 name") {
			t.Errorf("ls --all:\n%s", r)
		}
		// doctor says it too.
		_, dd := tg.doctor(t, []string{"CAIRN_STATE_IDENTITY=" + id})
		dd.wantCheck(t, checkHistory, statusOK, "4 versions of 1 name", "1 tombstone", "keeping 5 per name")
		// Exit codes: a name without object or history, a version not
		// kept.
		tg.cli(t, nil, "history", "no/such", "--identity", id).must(t, exitFail)
		tg.cli(t, nil, "restore", "app/db-password", "1.999", "--identity", id).must(t, exitFail)
		// verify opens history too.
		tg.cli(t, nil, "verify", "--identity", id).must(t, exitOK)
	})
}

// Issue #21: at 0ac0f30 an older genuine object put back by a writer of
// the bucket was served as current and verify passed (measured on fs and
// versitygw). Now verify reports it, naming both versions, and get
// --strict refuses it.
func TestPutBack_CLI_VerifyReportsAndStrictRefuses(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		ctx := t.Context()
		id, _ := tg.keygen(t, "id.txt")
		tg.cli(t, nil, "init", "--identity", id).must(t, exitOK)
		tg.cli(t, []byte("old"), "put", "app/key", "--identity", id).must(t, exitOK)
		oldBytes := rawBytes(t, tg, "app/key")
		tg.cli(t, []byte("new"), "put", "app/key", "--identity", id).must(t, exitOK)
		hist := decode[[]keptVersionDoc](t, tg.cli(t, nil, "history", "app/key", "--identity", id, "--json").must(t, exitOK))
		newer, older := hist[0].Version, hist[1].Version
		if _, err := tg.raw.Put(ctx, tg.key("app/key"), oldBytes, backend.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		// get without --strict is unchanged; with it, refused.
		if r := tg.cli(t, nil, "get", "app/key", "--identity", id).must(t, exitOK); r.stdout != "old" {
			t.Errorf("get = %q", r.stdout)
		}
		r := tg.cli(t, nil, "get", "--strict", "app/key", "--identity", id).must(t, exitFail)
		if r.stdout != "" || !strings.Contains(r.stderr, "version "+older+" is older than kept version "+newer) || !strings.Contains(r.stderr, "restore app/key "+newer) {
			t.Errorf("get --strict of a put-back object:\n%s", r)
		}
		v := decode[verifyDoc](t, tg.cli(t, nil, "verify", "--identity", id, "--json").must(t, exitFail))
		if v.OK || len(v.Failed) != 1 || v.Failed[0].Name != "app/key" || v.Failed[0].PutBack == nil ||
			v.Failed[0].PutBack.Current != older || v.Failed[0].PutBack.Newer != newer {
			t.Errorf("verify --json = %+v", v.Failed)
		}
		// The restore it names repairs it.
		tg.cli(t, nil, "restore", "app/key", newer, "--identity", id).must(t, exitOK)
		if r := tg.cli(t, nil, "get", "--strict", "app/key", "--identity", id).must(t, exitOK); r.stdout != "new" {
			t.Errorf("get --strict after restore = %q", r.stdout)
		}
		tg.cli(t, nil, "verify", "--identity", id).must(t, exitOK)
	})
}

// Each version's instance in `history` comes from the version's own
// header (ADR 0064): the CLI and an application (another instance) write
// the same name in turn, and each version names its writer; no writer
// record is written, and the bucket's bytes — every file of the fs
// store, every object of the S3 bucket — carry neither instance.
func TestHistory_CLI_InstanceFromEachVersionsHeader(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		ctx := t.Context()
		id, _ := tg.keygen(t, "id.txt")
		tg.cli(t, nil, "init", "--identity", id).must(t, exitOK)
		tg.cli(t, []byte("from the CLI"), "put", "app/w", "--identity", id).must(t, exitOK)
		const app = "app-pod-7f3a9c"
		st := tg.store(t, id)
		l, err := lock.Acquire(ctx, st, lock.Options{InstanceID: app})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Fence(st).Put(ctx, "app/w", []byte("from the app"), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		tg.cli(t, []byte("from the CLI again"), "put", "app/w", "--identity", id).must(t, exitOK)
		hist := decode[[]keptVersionDoc](t, tg.cli(t, nil, "history", "app/w", "--identity", id, "--json").must(t, exitOK))
		var got []string
		for _, v := range hist {
			got = append(got, v.Instance)
		}
		if want := []string{instanceID(), app, instanceID()}; !slices.Equal(got, want) {
			t.Fatalf("history --json instances = %q, want %q", got, want)
		}
		table := tg.cli(t, nil, "history", "app/w", "--identity", id).must(t, exitOK)
		if lines := strings.Split(strings.TrimSpace(table.stdout), "\n"); len(lines) != 4 || !strings.Contains(lines[2], app) {
			t.Errorf("history table does not name %s on the second version:\n%s", app, table.stdout)
		}
		for key, raw := range bucketBytes(t, tg) {
			if strings.Contains(key, ".writers") {
				t.Errorf("%s was written: there are no writer records", key)
			}
			for _, s := range []string{app, instanceID()} {
				if bytes.Contains(raw, []byte(s)) {
					t.Errorf("%s carries %q in the bucket's bytes", key, s)
				}
			}
		}
	})
}

// bucketBytes is everything the target's storage holds, as its operator
// reads it: every file under an fs store's directory, every object of an
// S3 bucket (through a client of its own), by path or key.
func bucketBytes(t *testing.T, tg *target) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	if dir, ok := strings.CutPrefix(tg.url, "file://"); ok {
		err := filepath.WalkDir(dir, func(p string, d iofs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			out[p] = b
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for key := range testkit.Snapshot(t, tg.raw) {
		out[key] = testkit.Read(t, tg.raw, key)
	}
	if len(out) < 4 {
		t.Fatalf("the bucket holds %d objects", len(out))
	}
	return out
}
