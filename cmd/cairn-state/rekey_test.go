package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/migratelog"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/storemeta"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/migrate"
	"github.com/cairnhq/state/store"
)

// pauseEnv is the test build's pause hook (testhooks_cairntest.go): rekey
// stops after re-sealing N objects, having saved its progress.
const pauseEnv = "CAIRN_STATE_TEST_REKEY_PAUSE_AFTER"

// pausedRekey is a `rekey` process stopped by the test-only pause hook
// after re-sealing some objects and saving its progress.
type pausedRekey struct {
	cmd    *exec.Cmd
	stderr io.ReadCloser
	log    strings.Builder // stderr up to the pause
	stdout bytes.Buffer
}

// startPausedRekey starts `rekey args...` with the pause hook set to after
// and waits until it has paused.
func (tg *target) startPausedRekey(t *testing.T, after int, args ...string) *pausedRekey {
	t.Helper()
	p := &pausedRekey{}
	p.cmd = exec.Command(binPath, append([]string{"rekey"}, args...)...)
	p.cmd.Env = tg.environ(pauseEnv + "=" + strconv.Itoa(after))
	p.cmd.Dir = tg.dir
	p.cmd.Stdout = &p.stdout
	var err error
	if p.stderr, err = p.cmd.StderrPipe(); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.stop(syscall.SIGKILL) })
	sc := bufio.NewScanner(p.stderr)
	for sc.Scan() {
		p.log.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "paused after") {
			return p
		}
	}
	p.stop(syscall.SIGKILL)
	t.Fatalf("rekey never paused:\n%s%s", p.log.String(), p.stdout.String())
	return nil
}

// stop sends sig and waits for the process; it returns the exit code and
// the rest of stderr.
func (p *pausedRekey) stop(sig syscall.Signal) (int, string) {
	if p.cmd.ProcessState != nil {
		return p.cmd.ProcessState.ExitCode(), ""
	}
	_ = p.cmd.Process.Signal(sig)
	// A process that ignores the signal is killed: the test then fails on
	// its exit code instead of hanging.
	timer := time.AfterFunc(30*time.Second, func() { _ = p.cmd.Process.Kill() })
	defer timer.Stop()
	rest, _ := io.ReadAll(p.stderr) // EOF once the process is gone
	_ = p.cmd.Wait()
	return p.cmd.ProcessState.ExitCode(), string(rest)
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

		p := tg.startPausedRekey(t, 12, "--identity", newID, "--old-identity", oldID)
		if !strings.Contains(p.log.String(), "rekey: 0/31 objects") {
			t.Errorf("rekey printed no plain progress lines when not on a terminal:\n%s", p.log.String())
		}
		p.stop(syscall.SIGKILL)

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
		// Exactly the 12 objects of the killed run are skipped: it was taken
		// over directly, so nobody can have written in between.
		if !doc.Resumed || doc.Total != n+1 || doc.Skipped != 12 || doc.Skipped+doc.Resealed != doc.Total {
			t.Errorf("resumed rekey = %+v\n%s", doc, r)
		}
		if !strings.Contains(r.stderr, "resuming") {
			t.Errorf("resumed rekey does not say it resumes:\n%s", r)
		}

		// Every object opens with the new key, with its value intact, and
		// bound to the store; the old key no longer belongs to the store.
		m, _ := storeadmin.Manifest(newOnly)
		for name, val := range want {
			got, _, err := newOnly.Get(ctx, name)
			if err != nil || !bytes.Equal(got, val) {
				t.Errorf("new key: %s = %q, %v; want %q", name, got, err, val)
			}
			data := rawBytes(t, tg, name)
			if hdr, err := envelope.PeekHeader(name, data); err != nil || hdr.StoreID != m.ID {
				t.Errorf("%s: header %+v, %v; want bound to %s", name, hdr, err, m.ID)
			}
			if err := envelope.Recover(name, data, nil, mustIdentities(t, oldID)...); !errors.Is(err, envelope.ErrNoMatchingIdentity) {
				t.Errorf("the old key still decrypts %s (err %v)", name, err)
			}
		}
		if _, err := tg.connect(t, oldID); !errors.Is(err, store.ErrNotMember) {
			t.Errorf("the old key after rekey: %v, want ErrNotMember", err)
		}
		// 1 at creation, 2 once the migration log was written, 3 after
		// the rekey (its resumed run does not raise it again).
		if m.Generation != 3 {
			t.Errorf("manifest after rekey = %+v, want generation 3", m)
		}
		recs, err := migratelog.Applied(ctx, newOnly)
		if err != nil || len(recs) != 1 {
			t.Errorf("migration log with the new key: %v, %v", recs, err)
		}
		// Nothing is left behind: no progress record, no held lock (on
		// storage with conditional writes a released lock object stays,
		// ADR 0066).
		ls := decode[lsDoc](t, tg.cli(t, nil, "ls", "--all", "--json").must(t, exitOK))
		lockObject := 0
		for _, o := range ls.Objects {
			if o.Name == progressName {
				t.Errorf("%s left behind after rekey", o.Name)
			}
			if o.Name == storemeta.LockName {
				lockObject = 1
			}
		}
		if st := decode[lockStatusDoc](t, tg.cli(t, nil, "lock", "status", "--identity", newID, "--json").must(t, exitOK)); st.Present {
			t.Errorf("lock held after rekey: %+v", st)
		}
		// verify agrees: all good with the new key, the lock's epoch
		// marker included (rekey skipped the lock's objects, and its own
		// acquisition wrote the marker sealed to the new key, and deleted
		// the older ones); the old key is refused before anything is read.
		v := decode[verifyDoc](t, tg.cli(t, nil, "verify", "--identity", newID, "--json").must(t, exitOK))
		// The objects, the migration log, the manifest and the epoch marker
		// (and the released lock object).
		if v.Checked != n+3+lockObject || len(v.Findings) != 0 || len(v.Failed) != 0 {
			t.Errorf("verify with the new key = %+v", v)
		}
		r = tg.cli(t, nil, "verify", "--identity", oldID, "--json").must(t, exitNotMember)
		if doc := decode[errorDoc](t, r); doc.Error.Store == nil || doc.Error.Store.StoreID != m.ID.String() {
			t.Errorf("verify with the old key: %+v", doc.Error)
		}
	})
}

func TestRekey_WithRecoveryRecipient_SealsToIt_AndAReadOnlyOldKeyIsNeeded(t *testing.T) {
	tg := fsTarget(t)
	oldID, _ := tg.keygen(t, "old.txt")
	newID, _ := tg.keygen(t, "new.txt")
	_, recovery := tg.keygen(t, "recovery.txt")
	tg.cli(t, nil, "init", "--identity", oldID).must(t, exitOK)
	tg.cli(t, []byte("secret"), "put", "x", "--identity", oldID).must(t, exitOK)

	// Without the old key the new one does not belong to the store:
	// exit 5, the way out, and nothing changed.
	r := tg.cli(t, nil, "rekey", "--identity", newID).must(t, exitNotMember)
	if !strings.Contains(r.stderr, "--old-identity") {
		t.Errorf("rekey without the old key gives no hint:\n%s", r)
	}
	tg.cli(t, nil, "get", "x", "--identity", oldID).must(t, exitOK)

	// Human output: a summary line.
	r = tg.cli(t, nil, "rekey", "--identity", newID, "--old-identity", oldID, "--recipient", recovery).must(t, exitOK)
	// x and its kept version (no writer record: ADR 0064).
	if !strings.Contains(r.stdout, "re-sealed 2 of 2 objects to 2 recipients") {
		t.Errorf("rekey summary:\n%s", r)
	}
	if r := tg.cli(t, nil, "get", "x", "--identity", newID).must(t, exitOK); r.stdout != "secret" {
		t.Errorf("get with the new key = %q", r.stdout)
	}
	tg.cli(t, nil, "get", "x", "--identity", oldID).must(t, exitNotMember)
	// The recovery key reads every object with stock age.
	recoveryID := filepath.Join(tg.dir, "recovery.txt")
	v := decode[verifyDoc](t, tg.cli(t, nil, "verify", "--identity", newID, "--recovery-identity", recoveryID, "--json").must(t, exitOK))
	if v.Recovery == nil || v.Recovery.Checked != v.Checked || v.Recovery.Recovered != v.Checked {
		t.Errorf("verify --recovery-identity = %+v", v.Recovery)
	}
}

func TestMigrateStatus_ShowsTheLog(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		id, _ := tg.keygen(t, "id.txt")
		tg.cli(t, nil, "init", "--identity", id).must(t, exitOK)
		r := tg.cli(t, nil, "migrate", "status", "--identity", id).must(t, exitOK)
		if !strings.Contains(r.stdout, "no migrations recorded") {
			t.Errorf("migrate status on an empty store:\n%s", r)
		}
		writeMigrationLog(t, tg, id)
		doc := decode[migrateStatusDoc](t, tg.cli(t, nil, "migrate", "status", "--identity", id, "--json").must(t, exitOK))
		if doc.Applied != 1 || doc.Unfinished != 0 || len(doc.Migrations) != 1 ||
			doc.Migrations[0].ID != "0001-seed" || doc.Migrations[0].State != migratelog.StateApplied {
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
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	l, err := lock.Acquire(ctx, st, lock.Options{InstanceID: "migrator", Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	_, err = migrate.Run(ctx, l, st, []migrate.Migration{{
		ID: "0001-seed", Description: "a test migration",
		Up: func(ctx context.Context, st *store.Store) error { return nil },
	}}, migrate.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
}

func TestWrites_AnotherCLIWritingOnThisHost_Exit3_ThenSIGTERMReleases_RekeyResumesAndResealsLaterWrites(t *testing.T) {
	tg := fsTarget(t)
	oldID, _ := tg.keygen(t, "old.txt")
	newID, _ := tg.keygen(t, "new.txt")
	want := seed(t, tg, 10, oldID)

	p := tg.startPausedRekey(t, 4, "--identity", newID, "--old-identity", oldID)
	// Same instance id (cairn-state@HOST), but that process is alive and
	// writing: refused, not taken over.
	r := tg.cli(t, []byte("v"), "put", "obj/new", "--identity", newID).must(t, exitHeld)
	if !strings.Contains(r.stderr, "another cairn-state process") || !strings.Contains(r.stderr, instanceID()) {
		t.Errorf("refusal does not say another cairn-state holds the lock:\n%s", r)
	}

	// SIGTERM: the rekey stops, saves its progress and releases the lock.
	code, rest := p.stop(syscall.SIGTERM)
	if code != exitSIGTERM {
		t.Errorf("rekey after SIGTERM exited %d, want %d:\n%s", code, exitSIGTERM, rest)
	}
	if st := decode[lockStatusDoc](t, tg.cli(t, nil, "lock", "status", "--json", "--identity", newID).must(t, exitOK)); st.Present {
		t.Errorf("the lock survived a SIGTERM'd rekey: %+v", st)
	}
	ls := decode[lsDoc](t, tg.cli(t, nil, "ls", "--all", "--json").must(t, exitOK))
	if !slices.ContainsFunc(ls.Objects, func(o objectDoc) bool { return o.Name == progressName }) {
		t.Fatalf("no progress record after SIGTERM: %+v", ls.Objects)
	}

	// The store's manifest moved first: an instance still on the old key
	// alone is refused before it can write.
	if _, err := tg.connect(t, oldID); !errors.Is(err, store.ErrNotMember) {
		t.Fatalf("the old key after an interrupted rekey: %v, want ErrNotMember", err)
	}
	// The lock was released, so someone may write before the resume: here
	// an instance with both keys takes the lock and rewrites an object the
	// interrupted run had already re-sealed. The resume re-seals it again.
	tg.cli(t, []byte("rewritten"), "put", "obj/000", "--identity", newID, "--identity", oldID, "--history", "0").must(t, exitOK)
	want["obj/000"] = []byte("rewritten")

	doc := decode[rekeyDoc](t, tg.cli(t, nil, "rekey", "--identity", newID, "--old-identity", oldID, "--json").must(t, exitOK))
	if !doc.Resumed || doc.Total != 10 || doc.Skipped+doc.Resealed+doc.UpToDate != 10 || doc.Skipped > 3 || doc.Resealed < 6 {
		t.Errorf("rekey after SIGTERM = %+v, want resumed, at most 3 of the 4 done objects skipped, the rewritten one re-sealed", doc)
	}
	newOnly := tg.store(t, newID)
	for name, val := range want {
		if got, _, err := newOnly.Get(t.Context(), name); err != nil || !bytes.Equal(got, val) {
			t.Errorf("%s with the new key: %q, %v", name, got, err)
		}
	}
}

func TestRekey_OnATerminal_DrawsAProgressBar(t *testing.T) {
	scriptBin, err := exec.LookPath("script")
	if err != nil {
		t.Skip("needs util-linux script(1) to give the CLI a terminal")
	}
	tg := fsTarget(t)
	id, _ := tg.keygen(t, "id.txt")
	seed(t, tg, 5, id)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// script runs the command on a new pseudo-terminal and copies what it
	// writes there to our stdout.
	cmd := exec.CommandContext(ctx, scriptBin, "-qefc", binPath+" rekey --restart --identity "+id, "/dev/null")
	cmd.Env = tg.environ()
	cmd.Dir = tg.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rekey on a terminal: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("\rrekey [")) || !bytes.Contains(out, []byte("] 5/5")) {
		t.Errorf("no progress bar on a terminal:\n%q", out)
	}
	if !bytes.Contains(out, []byte("re-sealed 5 of 5 objects")) {
		t.Errorf("no summary:\n%q", out)
	}
}

func TestRekey_SIGINTMidRun_SaysHowFarItGotAndThatTheSameCommandResumes(t *testing.T) {
	tg := fsTarget(t)
	oldID, _ := tg.keygen(t, "old.txt")
	newID, _ := tg.keygen(t, "new.txt")
	want := seed(t, tg, 30, oldID)

	for _, json := range []bool{false, true} {
		args := []string{"--identity", newID, "--old-identity", oldID, "--restart"}
		if json {
			args = append(args, "--json")
		}
		p := tg.startPausedRekey(t, 4, args...)
		code, rest := p.stop(syscall.SIGINT)
		if code != exitSIGINT {
			t.Errorf("rekey after SIGINT exited %d, want %d:\n%s", code, exitSIGINT, rest)
		}
		msg := "rekey interrupted at 4 of 30: resume with `cairn-state rekey --identity " + newID + " --old-identity " + oldID + "`"
		if !strings.Contains(result{stderr: rest}.said(), msg) {
			t.Errorf("after SIGINT, stderr does not say %q:\n%s%s", msg, p.log.String(), rest)
		}
		// The last progress line is the count reached, not the last tenth.
		last := "rekey: 4/30 objects\n"
		if json {
			last = `"done":4,`
		}
		if !strings.Contains(rest, last) {
			t.Errorf("the progress shown last is not 4/30:\n%s%s", p.log.String(), rest)
		}
		if json {
			doc := decode[errorDoc](t, result{stdout: p.stdout.String()})
			if !strings.Contains(doc.Error.Message, msg) || doc.Error.ExitCode != exitSIGINT || doc.Error.Kind != kindInterrupted {
				t.Errorf("--json error document: %+v", doc)
			}
			for line := range strings.SplitSeq(strings.TrimSpace(p.log.String()+rest), "\n") {
				if !strings.HasPrefix(line, "{") || !strings.HasSuffix(line, "}") {
					t.Errorf("--json: a stderr line that is not JSON: %q", line)
				}
			}
		}
	}

	// The same command resumes and finishes.
	doc := decode[rekeyDoc](t, tg.cli(t, nil, "rekey", "--identity", newID, "--old-identity", oldID, "--json").must(t, exitOK))
	if !doc.Resumed || doc.Total != 30 || doc.Skipped+doc.Resealed+doc.UpToDate != 30 {
		t.Errorf("rekey after SIGINT = %+v, want resumed", doc)
	}
	newOnly := tg.store(t, newID)
	for name, val := range want {
		if got, _, err := newOnly.Get(t.Context(), name); err != nil || !bytes.Equal(got, val) {
			t.Errorf("%s with the new key: %q, %v", name, got, err)
		}
	}
}

// TestRekey_SIGINTWhileResealing_CountIsRight interrupts a real rekey (no
// pause hook) while it re-seals: the message and the last progress line
// give the number of objects that really are re-sealed.
func TestRekey_SIGINTWhileResealing_CountIsRight(t *testing.T) {
	tg := fsTarget(t)
	oldID, _ := tg.keygen(t, "old.txt")
	newID, _ := tg.keygen(t, "new.txt")
	const n = 400
	want := seed(t, tg, n, oldID)

	cmd := exec.Command(binPath, "rekey", "--identity", newID, "--old-identity", oldID)
	cmd.Env, cmd.Dir = tg.environ(), tg.dir
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	sc := bufio.NewScanner(stderr)
	var log strings.Builder
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		var done, total int
		if _, err := fmt.Sscanf(sc.Text(), "rekey: %d/%d objects", &done, &total); err == nil && done >= n/10 {
			_ = cmd.Process.Signal(syscall.SIGINT)
			break
		}
	}
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
	}
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code == exitOK {
		t.Skipf("rekey finished before the signal reached it:\n%s", log.String())
	} else if code != exitSIGINT {
		t.Fatalf("exit %d:\n%s", code, log.String())
	}
	var k, total int
	_, after, _ := strings.Cut(log.String(), "rekey interrupted at ")
	if _, err := fmt.Sscanf(after, "%d of %d:", &k, &total); err != nil || total != n || k < n/10 || k >= n {
		t.Fatalf("no count in the message (k=%d total=%d, %v):\n%s", k, total, err, log.String())
	}
	if !strings.Contains(log.String(), fmt.Sprintf("rekey: %d/%d objects\n", k, n)) {
		t.Errorf("the progress shown last is not %d/%d:\n%s", k, n, log.String())
	}
	// k objects open with the new key — k+1 if the write in flight landed
	// after its context ended.
	newOnly := tg.store(t, newID)
	resealed := 0
	for name := range want {
		if _, _, err := newOnly.Get(t.Context(), name); err == nil {
			resealed++
		}
	}
	if resealed != k && resealed != k+1 {
		t.Errorf("%d objects open with the new key; the message said %d", resealed, k)
	}
	t.Logf("interrupted after %d of %d", k, n)
}
