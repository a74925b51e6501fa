package main

// doctor's checks of the identities, the store and its lock.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/testutil"
)

func TestDoctor_WorldReadableIdentityFile_FailsTheIdentityLine(t *testing.T) {
	tg := fsTarget(t)
	id, _ := tg.keygen(t, "id.txt")
	env := []string{"CAIRN_STATE_IDENTITY=" + id}
	tg.cliEnv(t, nil, env, "init").must(t, exitOK)
	tg.cliEnv(t, []byte("v"), env, "put", "x").must(t, exitOK)
	for _, mode := range []os.FileMode{0o644, 0o640} {
		if err := os.Chmod(id, mode); err != nil {
			t.Fatal(err)
		}
		r, doc := tg.doctor(t, env)
		r.must(t, exitFail)
		tg.checkHumanOutput(t, env, doc)
		doc.wantCheck(t, checkIdentity, statusFail, id, "mode "+fmt.Sprintf("%04o", mode.Perm()), "chmod 600 "+id)
		doc.wantCheck(t, checkMembership, statusSkip)
		doc.wantCheck(t, checkLock, statusOK) // the storage is fine
	}
}

func TestDoctor_IdentityFileMissingOrNotAnIdentity_FailsTheIdentityLine(t *testing.T) {
	tg := fsTarget(t)
	garbage := filepath.Join(tg.dir, "garbage.txt")
	if err := os.WriteFile(garbage, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ file, says string }{
		{filepath.Join(tg.dir, "missing.txt"), "no such file"},
		{garbage, garbage},
	} {
		r, doc := tg.doctor(t, []string{"CAIRN_STATE_IDENTITY=" + c.file})
		r.must(t, exitFail)
		doc.wantCheck(t, checkIdentity, statusFail, c.says)
	}
}

// TestDoctor_WrongIdentity_DoesNotBelongToTheStore: a key that is not the
// store's is a failure that says so; no key at all is only a warning.
func TestDoctor_WrongIdentity_DoesNotBelongToTheStore(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		id, _ := tg.keygen(t, "id.txt")
		other, _ := tg.keygen(t, "other.txt")
		tg.cli(t, nil, "--identity", id, "init").must(t, exitOK)
		tg.cli(t, []byte("v"), "--identity", id, "put", "app/x").must(t, exitOK)

		env := []string{"CAIRN_STATE_IDENTITY=" + other}
		r, doc := tg.doctor(t, env)
		r.must(t, exitFail)
		tg.checkHumanOutput(t, env, doc)
		doc.wantCheck(t, checkIdentity, statusOK)
		doc.wantCheck(t, checkMembership, statusFail, "does not belong to this store", ".cairn-state/.store", "wrong key", "--identity FILE", "exit 5")
		if doc.Failed != 1 {
			t.Errorf("%d checks failed, want only membership: %v", doc.Failed, doc.Checks)
		}

		r, doc = tg.doctor(t, nil)
		r.must(t, exitOK)
		doc.wantCheck(t, checkIdentity, statusWarn, "no identity configured", "--identity FILE")
		doc.wantCheck(t, checkMembership, statusSkip)
	})
}

// TestDoctor_LiveHolder_NamedOnTheLockLine: a running instance's lock is
// the normal state: ok, with its holder.
func TestDoctor_LiveHolder_NamedOnTheLockLine(t *testing.T) {
	tg := fsTarget(t)
	id, _ := tg.keygen(t, "id.txt")
	tg.startHolder(t, "pod-a", id)
	r, doc := tg.doctor(t, []string{"CAIRN_STATE_IDENTITY=" + id})
	r.must(t, exitOK)
	c := doc.wantCheck(t, checkLock, statusOK, `held by "pod-a"`, "live", "--wait")
	if c.Facts.Holder == nil || c.Facts.Holder.InstanceID != "pod-a" || c.Facts.Liveness != "live" {
		t.Errorf("lock facts %+v", c.Facts)
	}
	if c := doc.wantCheck(t, checkMembership, statusOK); c.Facts.Object != ".cairn-state/.store" {
		t.Errorf("membership did not read the store's manifest: %s", c.Finding)
	}
}

func TestDoctor_NoStoreAtTheDirectory_FailsAndCreatesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "typo")
	tg := &target{dir: t.TempDir(), url: "file://" + dir}
	r, doc := tg.doctor(t, nil)
	r.must(t, exitFail)
	doc.wantCheck(t, checkDirectory, statusFail, "no state store at "+dir)
	doc.wantCheck(t, checkLock, statusSkip)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("doctor created %s: %v", dir, err)
	}
}

// assertNoCredentials fails the test if a run printed the server's secret
// key.
func assertNoCredentials(t *testing.T, r result, srv *testutil.S3Server) {
	t.Helper()
	if strings.Contains(r.stdout+r.stderr, srv.SecretKey) {
		t.Errorf("the secret key was printed:\n%s", r)
	}
}

// TestDoctor_StoreRecord_BindsTheCheck: with the store's manifest
// (.cairn-state/.store) membership is judged on it, as every other command
// judges it: an object sealed to another key does not decide; another key
// fails; a garbage manifest fails, named, and is left alone.
func TestDoctor_StoreRecord_BindsTheCheck(t *testing.T) {
	tg := fsTarget(t)
	id, _ := tg.keygen(t, "id.txt")
	other, _ := tg.keygen(t, "other.txt")
	tg.cli(t, nil, "--identity", id, "init").must(t, exitOK)
	tg.cli(t, []byte("v"), "--identity", id, "put", "app/x").must(t, exitOK)
	st, err := tg.connect(t, id)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := storeadmin.Manifest(st)
	if !ok {
		t.Fatal("the first put wrote no manifest")
	}
	// An application object sealed to the other key must not decide.
	otherIDs, err := envelope.LoadIdentityFile(other)
	if err != nil {
		t.Fatal(err)
	}
	otherEnv, err := envelope.New(otherIDs, nil, envelope.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := otherEnv.Seal("app/y", []byte("v"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tg.raw.Put(t.Context(), tg.key("app/y"), sealed, backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}

	r, doc := tg.doctor(t, []string{"CAIRN_STATE_IDENTITY=" + id})
	r.must(t, exitOK)
	c := doc.wantCheck(t, checkMembership, statusOK, "the identity opens the store: store id "+m.ID.String()+" (created ", "1 recipient", "manifest generation 1", "read .cairn-state/.store", "--store-id "+m.ID.String())
	if c.Facts.StoreID != m.ID.String() || c.Facts.Object != ".cairn-state/.store" {
		t.Errorf("membership facts %+v", c.Facts)
	}
	r, doc = tg.doctor(t, []string{"CAIRN_STATE_IDENTITY=" + other})
	r.must(t, exitFail)
	c = doc.wantCheck(t, checkMembership, statusFail, "does not belong to this store", ".cairn-state/.store", m.ID.String(), "exit 5")
	if c.Facts.StoreID != m.ID.String() {
		t.Errorf("membership facts %+v", c.Facts)
	}
	// The CLI's other commands refuse the same key with exit 5.
	tg.cli(t, nil, "--identity", other, "ls").must(t, exitNotMember)

	garbage := []byte("not a manifest")
	if _, err := tg.raw.Put(t.Context(), tg.key(".store"), garbage, backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	r, doc = tg.doctor(t, []string{"CAIRN_STATE_IDENTITY=" + id})
	r.must(t, exitFail)
	doc.wantCheck(t, checkMembership, statusFail, ".cairn-state/.store", "restore")
	if got := rawBytes(t, tg, ".store"); !bytes.Equal(got, garbage) {
		t.Errorf("doctor touched the garbage manifest: %q", got)
	}
}
