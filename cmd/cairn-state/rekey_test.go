package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/state/envelope"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/migrate"
	"github.com/cairnhq/state/store"
)

// killRekeyAfter starts `rekey` with the test-only pause hook, waits until
// it has re-sealed `after` objects and saved its progress, and SIGKILLs it.
func (tg *target) killRekeyAfter(t *testing.T, after int, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, append([]string{"rekey"}, args...)...)
	cmd.Env = tg.environ(pauseEnv + "=" + strconv.Itoa(after))
	cmd.Dir = tg.dir
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	sc := bufio.NewScanner(stderr)
	paused := false
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "paused after") {
			paused = true
			break
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, stderr) // EOF: the only writer is dead
	_ = cmd.Wait()
	if !paused {
		t.Fatalf("rekey never paused:\n%s%s", log.String(), stdout.String())
	}
	if !strings.Contains(log.String(), "rekey: 0/") {
		t.Errorf("rekey printed no plain progress lines when not on a terminal:\n%s", log.String())
	}
}

func TestRekey_KilledThenResumed_EveryObjectOpensWithTheNewKeyOnly(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		ctx := t.Context()
		oldID, _ := tg.keygen(t, "old.txt")
		newID, _ := tg.keygen(t, "new.txt")
		const n = 30
		want := seed(t, tg, n, oldID)
		// A migration log, a reserved object, is re-keyed too.
		writeMigrationLog(t, tg, oldID)

		tg.killRekeyAfter(t, 12, "--identity", newID, "--old-identity", oldID)

		// Killed mid-way: some objects open with the new key, the rest
		// with the old one only; the dead rekey's lock is still there.
		newOnly := tg.store(t, newID)
		resealed := 0
		for name := range want {
			if _, _, err := newOnly.Get(ctx, name); err == nil {
				resealed++
			}
		}
		if resealed == 0 || resealed == n {
			t.Fatalf("after the kill %d of %d objects open with the new key; want some, not all", resealed, n)
		}
		st := decode[lockStatusDoc](t, tg.cli(t, nil, "lock", "status", "--identity", newID, "--json").must(t, exitOK))
		if !st.Present || st.Holder == nil || st.Holder.InstanceID != instanceID() {
			t.Fatalf("the killed rekey's lock: %+v", st)
		}

		// Resume: same command, no hook. It takes its own dead lock over
		// and continues where the progress record says.
		r := tg.cli(t, nil, "rekey", "--identity", newID, "--old-identity", oldID, "--json").must(t, exitOK)
		doc := decode[rekeyDoc](t, r)
		if !doc.Resumed || doc.Total != n+1 || doc.Skipped < 12 || doc.Skipped+doc.Resealed != doc.Total {
			t.Errorf("resumed rekey = %+v\n%s", doc, r)
		}
		if !strings.Contains(r.stderr, "resuming") {
			t.Errorf("resumed rekey does not say it resumes:\n%s", r)
		}

		// Every object opens with the new key only, with its value intact.
		oldOnly := tg.store(t, oldID)
		for name, val := range want {
			got, _, err := newOnly.Get(ctx, name)
			if err != nil || !bytes.Equal(got, val) {
				t.Errorf("new key: %s = %q, %v; want %q", name, got, err, val)
			}
			if _, _, err := oldOnly.Get(ctx, name); !errors.Is(err, envelope.ErrNoIdentity) {
				t.Errorf("old key still opens %s (err %v)", name, err)
			}
		}
		recs, err := migrate.Applied(ctx, newOnly)
		if err != nil || len(recs) != 1 {
			t.Errorf("migration log with the new key: %v, %v", recs, err)
		}
		// Nothing is left behind: no progress record, no lock.
		ls := decode[lsDoc](t, tg.cli(t, nil, "ls", "--all", "--json").must(t, exitOK))
		for _, o := range ls.Objects {
			if o.Name == progressName || o.Name == lock.Name {
				t.Errorf("%s left behind after rekey", o.Name)
			}
		}
		// verify agrees: all good with the new key, all wrong with the old.
		tg.cli(t, nil, "verify", "--identity", newID).must(t, exitOK)
		v := decode[verifyDoc](t, tg.cli(t, nil, "verify", "--identity", oldID, "--json").must(t, exitFail))
		if len(v.Failed) != n+1 {
			t.Errorf("verify with the old key: %d failures, want %d", len(v.Failed), n+1)
		}
		for _, f := range v.Failed {
			if f.Reason != reasonWrongKey {
				t.Errorf("verify with the old key: %s: %s", f.Name, f.Reason)
			}
		}
	})
}

func TestRekey_WithRecoveryRecipient_SealsToIt_AndAReadOnlyOldKeyIsNeeded(t *testing.T) {
	dir := t.TempDir()
	tg := &target{dir: dir, url: "file://" + dir + "/state"}
	oldID, _ := tg.keygen(t, "old.txt")
	newID, _ := tg.keygen(t, "new.txt")
	_, recovery := tg.keygen(t, "recovery.txt")
	tg.cli(t, []byte("secret"), "put", "x", "--identity", oldID).must(t, exitOK)

	// Without the old key the object cannot be opened: exit 1, a hint,
	// and nothing changed.
	r := tg.cli(t, nil, "rekey", "--identity", newID).must(t, exitFail)
	if !strings.Contains(r.stderr, "--old-identity") {
		t.Errorf("rekey without the old key gives no hint:\n%s", r)
	}
	tg.cli(t, nil, "get", "x", "--identity", oldID).must(t, exitOK)

	// Human output: a summary line.
	r = tg.cli(t, nil, "rekey", "--identity", newID, "--old-identity", oldID, "--recipient", recovery).must(t, exitOK)
	if !strings.Contains(r.stdout, "re-sealed 1 of 1 objects to 2 recipients") {
		t.Errorf("rekey summary:\n%s", r)
	}
	if r := tg.cli(t, nil, "get", "x", "--identity", newID).must(t, exitOK); r.stdout != "secret" {
		t.Errorf("get with the new key = %q", r.stdout)
	}
	tg.cli(t, nil, "get", "x", "--identity", oldID).must(t, exitFail)
}

func TestMigrateStatus_ShowsTheLog(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		id, _ := tg.keygen(t, "id.txt")
		r := tg.cli(t, nil, "migrate", "status", "--identity", id).must(t, exitOK)
		if !strings.Contains(r.stdout, "no migrations recorded") {
			t.Errorf("migrate status on an empty store:\n%s", r)
		}
		writeMigrationLog(t, tg, id)
		doc := decode[migrateStatusDoc](t, tg.cli(t, nil, "migrate", "status", "--identity", id, "--json").must(t, exitOK))
		if doc.Applied != 1 || doc.Unfinished != 0 || len(doc.Migrations) != 1 ||
			doc.Migrations[0].ID != "0001-seed" || doc.Migrations[0].State != migrate.StateApplied {
			t.Errorf("migrate status --json = %+v", doc)
		}
		r = tg.cli(t, nil, "migrate", "status", "--identity", id).must(t, exitOK)
		if !strings.Contains(r.stdout, "0001-seed") || !strings.Contains(r.stdout, "applied") {
			t.Errorf("migrate status:\n%s", r)
		}
	})
}

// writeMigrationLog runs one migration in the test process, so that the
// store has a migration log.
func writeMigrationLog(t *testing.T, tg *target, id string) {
	t.Helper()
	ctx := t.Context()
	st := tg.store(t, id)
	l, err := lock.Acquire(ctx, st, lock.Options{InstanceID: "migrator"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	_, err = migrate.Run(ctx, l, st, []migrate.Migration{{
		ID: "0001-seed", Description: "a test migration",
		Up: func(ctx context.Context, st *store.Store) error { return nil },
	}}, migrate.Options{})
	if err != nil {
		t.Fatal(err)
	}
}
