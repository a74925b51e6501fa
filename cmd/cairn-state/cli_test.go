package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/store"
)

func TestKeygen_WritesPrivateIdentityFile_PrintsOnlyItsRecipient(t *testing.T) {
	tg := &target{dir: t.TempDir()}
	path := filepath.Join(tg.dir, "id.txt")
	r := tg.cli(t, nil, "keygen", "-o", path).must(t, exitOK)

	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("identity file mode = %v, want 0600", fi.Mode().Perm())
	}
	ids, err := envelope.LoadIdentityFile(path)
	if err != nil || len(ids) != 1 {
		t.Fatalf("identity file does not parse: %v (%d identities)", err, len(ids))
	}
	rc, err := envelope.RecipientOf(ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(r.stdout), rc.(fmt.Stringer).String(); got != want {
		t.Errorf("printed recipient %q, the file's is %q", got, want)
	}

	// An existing identity is never overwritten.
	before, _ := os.ReadFile(path)
	tg.cli(t, nil, "keygen", "-o", path).must(t, exitFail)
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("keygen overwrote an existing identity file")
	}

	// With --json: the path and the recipient, nothing else.
	path2 := filepath.Join(tg.dir, "id2.txt")
	doc := decode[keygenDoc](t, tg.cli(t, nil, "keygen", "-o", path2, "--json").must(t, exitOK))
	if doc.IdentityFile != path2 || !strings.HasPrefix(doc.Recipient, "age1") {
		t.Errorf("keygen --json = %+v", doc)
	}
	// Without -o it writes to --identity's path.
	path3 := filepath.Join(tg.dir, "id3.txt")
	tg.cli(t, nil, "--identity", path3, "keygen").must(t, exitOK)
	if _, err := os.Stat(path3); err != nil {
		t.Errorf("keygen without -o did not write --identity's file: %v", err)
	}
}

func TestUsageErrors_Exit2WithMessageOnStderr(t *testing.T) {
	dir := t.TempDir()
	tg := &target{dir: dir, url: "file://" + filepath.Join(dir, "state")}
	id, _ := tg.keygen(t, "id.txt")
	noURL := &target{dir: dir}
	for _, tc := range []struct {
		name string
		tg   *target
		args []string
		want string
	}{
		{"no command", tg, nil, "no command"},
		{"unknown command", tg, []string{"frobnicate"}, "unknown command"},
		{"unknown flag", tg, []string{"ls", "--colour"}, "colour"},
		{"get without name", tg, []string{"get", "--identity", id}, "missing argument"},
		{"put with too many args", tg, []string{"put", "a", "b", "c", "--identity", id}, "too many"},
		{"lock without subcommand", tg, []string{"lock"}, "missing subcommand"},
		{"unknown lock subcommand", tg, []string{"lock", "steal"}, "unknown command"},
		{"no url", noURL, []string{"ls"}, "CAIRN_STATE_URL"},
		{"no identity", tg, []string{"get", "x"}, "CAIRN_STATE_IDENTITY"},
		{"reserved name", tg, []string{"put", ".lock", "--identity", id}, "reserved"},
		{"bad recipient", tg, []string{"put", "x", "--identity", id, "--recipient", "age1nope"}, "recipient"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.tg.cli(t, nil, tc.args...).must(t, exitUsage)
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr does not mention %q:\n%s", tc.want, r)
			}
		})
	}
	// --json usage errors still put one document on stdout.
	r := tg.cli(t, nil, "frobnicate", "--json").must(t, exitUsage)
	if doc := decode[errorDoc](t, r); doc.Error.ExitCode != exitUsage {
		t.Errorf("error document %+v", doc)
	}
	// help is not an error.
	if r := tg.cli(t, nil, "help").must(t, exitOK); !strings.Contains(r.stdout, "lock break") {
		t.Errorf("help does not list the commands:\n%s", r)
	}
	if r := tg.cli(t, nil, "lock", "break", "-h").must(t, exitOK); !strings.Contains(r.stdout, "lock break [--holder ID] [--force]") {
		t.Errorf("lock break -h:\n%s", r)
	}
	// With --json, help is one JSON document too.
	type usageDoc struct {
		Usage string `json:"usage"`
	}
	if doc := decode[usageDoc](t, tg.cli(t, nil, "--json", "help").must(t, exitOK)); !strings.Contains(doc.Usage, "lock break") {
		t.Errorf("--json help: %+v", doc)
	}
	if doc := decode[usageDoc](t, tg.cli(t, nil, "lock", "break", "-h", "--json").must(t, exitOK)); !strings.Contains(doc.Usage, "lock break [--holder ID] [--force]") {
		t.Errorf("lock break -h --json: %+v", doc)
	}
}

func TestObjects_PutGetLsRm_RoundTripThroughTheStore(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		id, _ := tg.keygen(t, "id.txt")
		binary := make([]byte, 5000)
		rand.Read(binary)
		file := filepath.Join(tg.dir, "blob.bin")
		if err := os.WriteFile(file, binary, 0o600); err != nil {
			t.Fatal(err)
		}

		tg.cli(t, nil, "init", "--identity", id).must(t, exitOK)
		// put from stdin (global flags before the command), and from a
		// file (flags after the positional arguments).
		r := tg.cli(t, []byte("hello\n"), "--identity", id, "put", "greeting").must(t, exitOK)
		if !strings.Contains(r.stdout, "greeting") {
			t.Errorf("put does not name the object: %s", r)
		}
		put := decode[putDoc](t, tg.cli(t, nil, "put", "dir/blob", file, "--identity", id, "--json").must(t, exitOK))
		if put.Name != "dir/blob" || put.Plaintext != int64(len(binary)) || put.Lock.InstanceID != instanceID() || put.Lock.Epoch == 0 {
			t.Errorf("put --json = %+v", put)
		}
		// The lock was released after the write.
		if st := decode[lockStatusDoc](t, tg.cli(t, nil, "lock", "status", "--json", "--identity", id).must(t, exitOK)); st.Present {
			t.Errorf("lock held after put: %+v", st)
		}

		// get returns exactly what was put, and the store agrees.
		if r := tg.cli(t, nil, "get", "greeting", "--identity", id).must(t, exitOK); r.stdout != "hello\n" {
			t.Errorf("get greeting = %q", r.stdout)
		}
		if r := tg.cli(t, nil, "get", "dir/blob", "--identity", id).must(t, exitOK); r.stdout != string(binary) {
			t.Errorf("get dir/blob: %d bytes differ from the %d put", len(r.stdout), len(binary))
		}
		g := decode[getDoc](t, tg.cli(t, nil, "--json", "get", "dir/blob", "--identity", id).must(t, exitOK))
		if !bytes.Equal(g.Data, binary) || g.Version != put.Version {
			t.Errorf("get --json: data equal %v, version %q want %q", bytes.Equal(g.Data, binary), g.Version, put.Version)
		}
		data, _, err := tg.store(t, id).Get(t.Context(), "greeting")
		if err != nil || string(data) != "hello\n" {
			t.Errorf("store.Get(greeting) = %q, %v", data, err)
		}

		// ls needs no identity; it lists names, sealed sizes and times.
		ls := decode[lsDoc](t, tg.cli(t, nil, "ls", "--json").must(t, exitOK))
		if len(ls.Objects) != 2 || ls.Objects[0].Name != "dir/blob" || ls.Objects[1].Name != "greeting" {
			t.Fatalf("ls --json = %+v", ls)
		}
		for _, o := range ls.Objects {
			if o.Size <= 0 || o.ModTime.IsZero() || o.Version == "" {
				t.Errorf("ls entry %+v lacks size, time or version", o)
			}
		}
		if ls := decode[lsDoc](t, tg.cli(t, nil, "ls", "dir/", "--json").must(t, exitOK)); len(ls.Objects) != 1 || ls.Objects[0].Name != "dir/blob" {
			t.Errorf("ls dir/ = %+v", ls)
		}
		if r := tg.cli(t, nil, "ls").must(t, exitOK); !strings.Contains(r.stdout, "greeting") || !strings.Contains(r.stdout, "dir/blob") {
			t.Errorf("ls:\n%s", r)
		}

		// rm removes; a second rm and a get of the removed object fail.
		rm := decode[rmDoc](t, tg.cli(t, nil, "rm", "greeting", "--identity", id, "--json").must(t, exitOK))
		if !rm.Removed || rm.Name != "greeting" {
			t.Errorf("rm --json = %+v", rm)
		}
		if _, _, err := tg.raw.Get(t.Context(), tg.key("greeting")); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("raw object after rm: %v, want not found", err)
		}
		r = tg.cli(t, nil, "rm", "greeting", "--identity", id).must(t, exitFail)
		if !strings.Contains(r.stderr, "greeting") {
			t.Errorf("rm of a missing object does not name it:\n%s", r)
		}
		r = tg.cli(t, nil, "get", "greeting", "--identity", id, "--json").must(t, exitFail)
		if doc := decode[errorDoc](t, r); doc.Error.ExitCode != exitFail || !strings.Contains(doc.Error.Message, "greeting") {
			t.Errorf("get of a removed object: %+v", doc)
		}

		// Another key does not belong to the store: exit 5, and it says so.
		other, _ := tg.keygen(t, "other.txt")
		r = tg.cli(t, nil, "get", "dir/blob", "--identity", other).must(t, exitNotMember)
		if !strings.Contains(r.stderr, "does not belong to this store") {
			t.Errorf("get with another key:\n%s", r)
		}
	})
}

func TestVerify_ReportsEachFailingObjectWithItsReason(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		ctx := t.Context()
		id, _ := tg.keygen(t, "id.txt")
		other, _ := tg.keygen(t, "other.txt")
		st := tg.store(t, id)
		for _, name := range []string{"good/a", "good/b", "tampered", "moved-from", "truncated"} {
			if _, err := st.Put(ctx, name, []byte("value of "+name), store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// An object of this store sealed by another key, and one copied
		// from another store that shares this store's key.
		m, _ := storeadmin.Manifest(st)
		ids, err := envelope.LoadIdentityFile(other)
		if err != nil {
			t.Fatal(err)
		}
		otherEnv, err := envelope.New(ids, nil, envelope.Options{StoreID: m.ID})
		if err != nil {
			t.Fatal(err)
		}
		sealed, err := otherEnv.Seal("foreign", []byte("sealed to another key"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tg.raw.Put(ctx, tg.key("foreign"), sealed, backend.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		staging := *tg
		staging.root = "staging"
		if _, err := staging.store(t, id).Put(ctx, "copied", []byte("from staging"), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		// Tamper with the sealed bytes directly in the storage.
		raw := func(name string) []byte { return rawBytes(t, tg, name) }
		write := func(name string, b []byte) {
			if _, err := tg.raw.Put(ctx, tg.key(name), b, backend.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		flipped := raw("tampered")
		flipped[len(flipped)-20] ^= 0x01
		write("tampered", flipped)
		write("moved-to", raw("moved-from"))
		whole := raw("truncated")
		write("truncated", whole[:len(whole)-10])
		write("plain", []byte("not sealed at all"))
		write("copied", rawBytes(t, &staging, "copied"))

		want := map[string]string{
			"tampered":  reasonTampered,
			"moved-to":  reasonNameMismatch,
			"truncated": reasonTruncated,
			"plain":     reasonNotEnvelope,
			"foreign":   reasonWrongKey,
			"copied":    reasonForeignStore,
		}
		r := tg.cli(t, nil, "verify", "--identity", id, "--json").must(t, exitFail)
		doc := decode[verifyDoc](t, r)
		// 9 objects and the store's manifest.
		if doc.OK || doc.Checked != 10 || doc.Store == nil || doc.Store.ID != m.ID.String() {
			t.Errorf("verify: ok=%v checked=%d store=%+v, want false, 10 and store %s", doc.OK, doc.Checked, doc.Store, m.ID)
		}
		got := map[string]string{}
		for _, f := range doc.Failed {
			got[f.Name] = f.Reason
			if !strings.Contains(f.Error, f.Name) {
				t.Errorf("failure of %q does not name it: %s", f.Name, f.Error)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("verify failures = %v, want %v", got, want)
		}
		// The human report names each failure and its reason.
		r = tg.cli(t, nil, "verify", "--identity", id).must(t, exitFail)
		for name, why := range want {
			if !strings.Contains(r.stdout, "FAIL "+name+": "+why) {
				t.Errorf("human report lacks %q: %q:\n%s", name, why, r)
			}
		}
		if !strings.Contains(r.stderr, "6 of 10 objects failed") {
			t.Errorf("stderr lacks the summary:\n%s", r)
		}

		// Once the bad objects are gone, verify passes.
		for name := range want {
			if err := tg.raw.Delete(ctx, tg.key(name), backend.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		doc = decode[verifyDoc](t, tg.cli(t, nil, "verify", "--identity", id, "--json").must(t, exitOK))
		if !doc.OK || doc.Checked != 4 || len(doc.Failed) != 0 || len(doc.Findings) != 0 {
			t.Errorf("verify after cleanup = %+v", doc)
		}
	})
}

// TestSecretsNeverPrinted runs commands that touch identities with --verbose
// (logging on) and checks that no identity appears: checkOutput does it for
// every run; this test makes sure the verbose paths run too.
func TestSecretsNeverPrinted_EvenVerbose(t *testing.T) {
	dir := t.TempDir()
	tg := &target{dir: dir, url: "file://" + filepath.Join(dir, "state")}
	id, _ := tg.keygen(t, "id.txt")
	secret, err := os.ReadFile(id)
	if err != nil {
		t.Fatal(err)
	}
	var key string
	for _, line := range strings.Split(string(secret), "\n") {
		if strings.HasPrefix(line, "AGE-SECRET-KEY-") {
			key = line
		}
	}
	for _, args := range [][]string{
		{"init", "--identity", id, "--verbose"},
		{"put", "x", "--identity", id, "--verbose"},
		{"get", "x", "--identity", id, "--verbose"},
		{"verify", "--identity", id, "--verbose", "--json"},
		{"lock", "status", "--identity", id, "--verbose"},
		{"rekey", "--identity", id, "--verbose"},
	} {
		r := tg.cli(t, []byte("v"), args...).must(t, exitOK)
		if key == "" || strings.Contains(r.stdout+r.stderr, key) {
			t.Fatalf("%v printed the identity (or none was found in the file)", args)
		}
	}
}

// seed writes n objects sealed to the identity files, in the test process.
func seed(t testing.TB, tg *target, n int, ids ...string) map[string][]byte {
	t.Helper()
	st := tg.store(t, ids...)
	want := map[string][]byte{}
	for i := range n {
		name := fmt.Sprintf("obj/%03d", i)
		val := fmt.Appendf(nil, "value %d %s", i, strings.Repeat("x", i))
		if _, err := st.Put(context.Background(), name, val, store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		want[name] = val
	}
	return want
}
