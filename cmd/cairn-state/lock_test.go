package main

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/state/internal/lockadmin"
)

func TestWrites_LiveForeignHolder_Exit3NamingHolder_ReadsStillWork(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		id, _ := tg.keygen(t, "id.txt")
		seed(t, tg, 1, id)
		tg.startHolder(t, "pod-a", id)

		for _, args := range [][]string{
			{"put", "obj/new", "--identity", id},
			{"rm", "obj/000", "--identity", id},
			{"rekey", "--restart", "--identity", id},
		} {
			r := tg.cli(t, []byte("v"), args...).must(t, exitHeld)
			if !strings.Contains(r.stderr, `"pod-a"`) || !strings.Contains(r.stderr, "stale after") {
				t.Errorf("%s: refusal does not name the holder and its stale horizon:\n%s", args[0], r)
			}
			// A write refused is not a boot refused.
			if !strings.Contains(r.stderr, "refusing to write: state lock held by") || strings.Contains(r.stderr, "refusing to start") {
				t.Errorf("%s: refusal wording:\n%s", args[0], r)
			}
		}
		doc := decode[errorDoc](t, tg.cli(t, []byte("v"), "put", "obj/new", "--identity", id, "--json").must(t, exitHeld))
		if doc.Error.ExitCode != exitHeld || doc.Error.Holder == nil || doc.Error.Holder.InstanceID != "pod-a" || doc.Error.Holder.PID == 0 {
			t.Errorf("put --json refusal = %+v", doc.Error)
		}
		// Nothing was written or removed.
		ls := decode[lsDoc](t, tg.cli(t, nil, "ls", "--json").must(t, exitOK))
		if len(ls.Objects) != 1 || ls.Objects[0].Name != "obj/000" {
			t.Errorf("objects after refused writes: %+v", ls.Objects)
		}
		// Reads need no lock.
		tg.cli(t, nil, "get", "obj/000", "--identity", id).must(t, exitOK)
		tg.cli(t, nil, "verify", "--identity", id).must(t, exitOK)

		// lock status shows the holder and exits 0.
		r := tg.cli(t, nil, "lock", "status", "--identity", id).must(t, exitOK)
		for _, want := range []string{`"pod-a"`, "live", "epoch 1", "heartbeat:", "stale:"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("lock status lacks %q:\n%s", want, r)
			}
		}
		st := decode[lockStatusDoc](t, tg.cli(t, nil, "lock", "status", "--identity", id, "--json").must(t, exitOK))
		if !st.Present || !st.Readable || st.Stale || st.Holder == nil || st.Holder.InstanceID != "pod-a" ||
			st.Holder.Epoch != 1 || st.Holder.Mode == "" || *st.StaleAfterSeconds != 300 || *st.StaleInSeconds <= 0 {
			t.Errorf("lock status --json = %+v holder %+v", st, st.Holder)
		}
		// A shorter --stale-after does not cut the holder's recorded
		// window (the default 5m) short.
		st = decode[lockStatusDoc](t, tg.cli(t, nil, "lock", "status", "--stale-after", "1s", "--identity", id, "--json").must(t, exitOK))
		if st.Stale || *st.StaleAfterSeconds != 300 {
			t.Errorf("lock status --stale-after 1s of a holder running 5m = %+v", st)
		}
		// Without a key the lock is seen, not read; with a key that does
		// not belong to the store, nothing is looked at (exit 5).
		st = decode[lockStatusDoc](t, tg.cli(t, nil, "lock", "status", "--json").must(t, exitOK))
		if !st.Present || st.Readable || st.Unreadable == "" {
			t.Errorf("lock status without a key = %+v", st)
		}
		other, _ := tg.keygen(t, "other.txt")
		tg.cli(t, nil, "lock", "status", "--identity", other, "--json").must(t, exitNotMember)
	})
}

func TestLockBreak_LiveLock_RefusedUnlessForcedWithMatchingHolder(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		id, _ := tg.keygen(t, "id.txt")
		tg.startHolder(t, "pod-a", id)

		for _, args := range [][]string{
			{"lock", "break"},
			{"lock", "break", "--holder", "pod-a"},
			{"lock", "break", "--force"},
			{"lock", "break", "--force", "--holder", "pod-b"},
		} {
			r := tg.cli(t, nil, append(args, "--identity", id)...).must(t, exitHeld)
			if !strings.Contains(r.stderr, `"pod-a"`) {
				t.Errorf("%v: refusal does not name the holder:\n%s", args, r)
			}
		}
		if r := tg.cli(t, nil, "lock", "status", "--identity", id).must(t, exitOK); !strings.Contains(r.stdout, `held by "pod-a"`) {
			t.Fatalf("a refused break touched the lock:\n%s", r)
		}

		doc := decode[lockBreakDoc](t, tg.cli(t, nil, "lock", "break", "--force", "--holder", "pod-a", "--identity", id, "--json").must(t, exitOK))
		if doc.Removed.InstanceID != "pod-a" || !doc.Forced || doc.Removed.Epoch != 1 {
			t.Errorf("lock break --json = %+v", doc)
		}
		if r := tg.cli(t, nil, "lock", "status", "--identity", id).must(t, exitOK); !strings.Contains(r.stdout, "not held") {
			t.Errorf("lock status after break:\n%s", r)
		}
		// No lock left to break: a failure, not a usage error.
		tg.cli(t, nil, "lock", "break", "--identity", id).must(t, exitFail)
	})
}

func TestLockBreak_StaleLock_RemovedWithoutForce_NamingWhatItRemoved(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		id, _ := tg.keygen(t, "id.txt")
		h := tg.startHolderWindow(t, "pod-gone", id, 2*time.Second)
		h.kill(t) // SIGKILL: the lock stays behind, no longer refreshed
		waitStale(t, tg, id)
		r := tg.cli(t, nil, "lock", "status", "--stale-after", "2s", "--identity", id).must(t, exitOK)
		if !strings.Contains(r.stdout, `"pod-gone" (stale)`) || !strings.Contains(r.stdout, "take it over at once") {
			t.Errorf("lock status of a stale lock:\n%s", r)
		}
		r = tg.cli(t, nil, "lock", "break", "--stale-after", "2s", "--identity", id).must(t, exitOK)
		if !strings.Contains(r.stdout, `removed lock held by "pod-gone"`) {
			t.Errorf("lock break does not say what it removed:\n%s", r)
		}
		// With the identity: a released lock object (compare-and-swap
		// mode keeps one, ADR 0066) or none, not held either way; without
		// one the released record cannot be told from a held one.
		if r := tg.cli(t, nil, "lock", "status", "--identity", id).must(t, exitOK); !strings.Contains(r.stdout, "not held") {
			t.Errorf("lock status after break:\n%s", r)
		}
	})
}

func TestPut_StaleForeignLock_TakenOver(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		id, _ := tg.keygen(t, "id.txt")
		tg.startHolderWindow(t, "pod-gone", id, 2*time.Second).kill(t)
		waitStale(t, tg, id)
		doc := decode[putDoc](t, tg.cli(t, []byte("v"), "put", "x", "--stale-after", "2s", "--identity", id, "--json").must(t, exitOK))
		// The write replaced the stale record: the epoch grew.
		if doc.Lock.InstanceID != instanceID() || doc.Lock.Epoch != 2 {
			t.Errorf("put over a stale lock: %+v", doc.Lock)
		}
		if st := decode[lockStatusDoc](t, tg.cli(t, nil, "lock", "status", "--json", "--identity", id).must(t, exitOK)); st.Present {
			t.Errorf("lock left behind after the put: %+v", st)
		}
	})
}

// waitStale waits until the target's lock is stale when judged with a 2s
// window, and decided so where a heartbeat can confirm it: a readable
// record is not still watched because the storage's whole-second clock and
// its holder's own heartbeat disagree. (An unreadable one is always watched
// once by a boot: nothing in it can confirm its age.)
func waitStale(t *testing.T, tg *target, id string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	args := []string{"lock", "status", "--stale-after", "2s", "--json"}
	if id != "" {
		args = append(args, "--identity", id)
	}
	for {
		st := decode[lockStatusDoc](t, tg.cli(t, nil, args...).must(t, exitOK))
		if st.Present && st.Stale && (!st.Readable || st.Liveness != string(lockadmin.Watching)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("lock never went stale: %+v", st)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func TestLockBreak_StaleUnreadableLock_RemovedAndSaidSo(t *testing.T) {
	tg := fsTarget(t)
	theirs, _ := tg.keygen(t, "theirs.txt")
	ours, _ := tg.keygen(t, "ours.txt")
	tg.store(t, ours) // the store is ours; an old version of the app ran with another key
	tg.startLegacyHolder(t, "pod-rotated", theirs, 2*time.Second).kill(t)
	// A key that does not belong to the store breaks nothing.
	tg.cli(t, nil, "lock", "break", "--stale-after", "2s", "--identity", theirs, "--json").must(t, exitNotMember)
	// Unreadable here: old on the storage's clock, which nothing in it can
	// confirm, so a boot would watch it for the stale window (ADR 0028)
	// and lock break without --force, which takes only what a boot takes
	// at once, refuses; --force alone removes it.
	time.Sleep(3 * time.Second) // the storage's age passes the 2 s window
	st := decode[lockStatusDoc](t, tg.cli(t, nil, "lock", "status", "--stale-after", "2s", "--identity", ours, "--json").must(t, exitOK))
	if !st.Present || st.Readable || st.Stale {
		t.Fatalf("old lock sealed to other keys: %+v, want present, unreadable, not stale (watched)", st)
	}
	tg.cli(t, nil, "lock", "break", "--stale-after", "2s", "--identity", ours).must(t, exitHeld)
	doc := decode[lockBreakDoc](t, tg.cli(t, nil, "lock", "break", "--force", "--stale-after", "2s", "--identity", ours, "--json").must(t, exitOK))
	if !doc.Unreadable || !doc.Forced {
		t.Errorf("lock break --force of an old unreadable lock = %+v", doc)
	}
	if st := decode[lockStatusDoc](t, tg.cli(t, nil, "lock", "status", "--json", "--identity", ours).must(t, exitOK)); st.Present {
		t.Errorf("lock still present: %+v", st)
	}
}

// A live instance's lock that this CLI cannot read — no identity, or an
// old version of the application still running with another key — may
// belong to a running instance: writes and lock break refuse it with exit 3
// and leave it alone; only lock break --force (alone: no holder can be
// matched) removes it. A key that does not belong to the store is refused
// with exit 5 before the lock is looked at, and the lock is left alone.
func TestLiveUnreadableLock_WritesAndBreakRefused_Exit3_OnlyForceAloneBreaksIt(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		theirs, _ := tg.keygen(t, "theirs.txt")
		ours, _ := tg.keygen(t, "ours.txt")
		tg.store(t, ours)
		tg.startLegacyHolder(t, "pod-a", theirs, 0)
		held := func() {
			t.Helper()
			if s := tg.legacyLockHolder(t, theirs); !s.Readable || s.Record.InstanceID != "pod-a" || s.Record.Epoch != 1 {
				t.Fatalf("pod-a's lock was touched: %+v", s)
			}
		}

		for _, id := range []string{"", ours} {
			args := []string{"lock", "status", "--json"}
			if id != "" {
				args = append(args, "--identity", id)
			}
			st := decode[lockStatusDoc](t, tg.cli(t, nil, args...).must(t, exitOK))
			if !st.Present || st.Readable || st.Stale || *st.StaleInSeconds <= 0 {
				t.Errorf("lock status (identity %q) of a live lock sealed to other keys = %+v, want present, unreadable, not stale", id, st)
			}
		}
		r := tg.cli(t, nil, "lock", "status", "--identity", ours).must(t, exitOK)
		if !strings.Contains(r.stdout, "may belong to a live instance") {
			t.Errorf("lock status of a live unreadable lock:\n%s", r)
		}

		// The other key does not belong to the store: exit 5, untouched.
		for _, args := range [][]string{
			{"put", "foo", "--identity", theirs},
			{"rekey", "--restart", "--identity", theirs},
			{"lock", "break", "--force", "--identity", theirs},
		} {
			r := tg.cli(t, []byte("v"), args...).must(t, exitNotMember)
			if !strings.Contains(r.stderr, "does not belong to this store") {
				t.Errorf("%v: refusal does not say the key does not belong:\n%s", args, r)
			}
			held()
		}
		doc := decode[errorDoc](t, tg.cli(t, []byte("v"), "put", "foo", "--identity", theirs, "--json").must(t, exitNotMember))
		if doc.Error.ExitCode != exitNotMember || doc.Error.Store == nil || doc.Error.Store.StoreID == "" || doc.Error.Store.Recipients != 1 {
			t.Errorf("put --json refusal with a foreign key = %+v", doc.Error)
		}

		for _, args := range [][]string{
			{"put", "foo", "--identity", ours},
			{"rm", "foo", "--identity", ours},
			{"rekey", "--restart", "--identity", ours},
		} {
			r := tg.cli(t, []byte("v"), args...).must(t, exitHeld)
			for _, want := range []string{"held by an instance whose key this process does not hold", "may belong to a live instance", "refusing to write", "hint:"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("%s: refusal lacks %q:\n%s", args[0], want, r)
				}
			}
			held()
		}
		doc = decode[errorDoc](t, tg.cli(t, []byte("v"), "put", "foo", "--identity", ours, "--json").must(t, exitHeld))
		if doc.Error.ExitCode != exitHeld || doc.Error.Holder != nil || doc.Error.Unreadable == "" || *doc.Error.StaleInSeconds <= 0 {
			t.Errorf("put --json refusal of an unreadable live lock = %+v", doc.Error)
		}

		for _, args := range [][]string{
			{"lock", "break"},
			{"lock", "break", "--identity", ours},
			{"lock", "break", "--holder", "pod-a", "--identity", ours},
			{"lock", "break", "--force", "--holder", "pod-a", "--identity", ours},
		} {
			r := tg.cli(t, nil, args...).must(t, exitHeld)
			if !strings.Contains(r.stderr, "may belong to a live instance") || !strings.Contains(r.stderr, "lock break --force") {
				t.Errorf("%v: refusal does not say what to do:\n%s", args, r)
			}
			held()
		}
		// Forced alone: removed, and it says it could not read it.
		bd := decode[lockBreakDoc](t, tg.cli(t, nil, "lock", "break", "--force", "--identity", ours, "--json").must(t, exitOK))
		if !bd.Unreadable || !bd.Forced || bd.Removed.InstanceID != "" {
			t.Errorf("lock break --force of a live unreadable lock = %+v", bd)
		}
		if st := decode[lockStatusDoc](t, tg.cli(t, nil, "lock", "status", "--json", "--identity", ours).must(t, exitOK)); st.Present {
			t.Errorf("lock still present after a forced break: %+v", st)
		}
	})
}

func TestWait_LiveHolder_PollsForDuration_ThenExit3NamingTheHolder(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		id, _ := tg.keygen(t, "id.txt")
		seed(t, tg, 1, id)
		tg.startHolder(t, "pod-a", id)
		for _, args := range [][]string{
			{"put", "obj/new", "--wait", "2s"},
			{"rm", "obj/000", "--wait", "2s"},
			{"rekey", "--restart", "--wait", "2s", "--json"},
		} {
			start := time.Now()
			r := tg.cli(t, []byte("v"), append(args, "--identity", id)...).must(t, exitHeld)
			if took := time.Since(start); took < 2*time.Second {
				t.Errorf("%v gave up after %s, before its --wait", args, took)
			}
			for _, want := range []string{"waiting up to 2s for the lock held by \"pod-a\"", "waited 2s for the lock", `held by "pod-a"`, "hint: stop \"pod-a\""} {
				if !strings.Contains(r.said(), want) {
					t.Errorf("%v: stderr lacks %q:\n%s", args, want, r)
				}
			}
		}
		ls := decode[lsDoc](t, tg.cli(t, nil, "ls", "--json").must(t, exitOK))
		if len(ls.Objects) != 1 || ls.Objects[0].Name != "obj/000" {
			t.Errorf("objects after refused writes: %+v", ls.Objects)
		}
		// Without --wait the refusal is immediate; a negative one is a
		// usage error.
		tg.cli(t, []byte("v"), "put", "obj/new", "--identity", id).must(t, exitHeld)
		tg.cli(t, []byte("v"), "put", "obj/new", "--wait", "-1s", "--identity", id).must(t, exitUsage)
	})
}

func TestWait_HolderReleasesWhileWaiting_TheWriteGoesThrough(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		id, _ := tg.keygen(t, "id.txt")
		h := tg.startHolder(t, "pod-a", id)

		cmd := exec.Command(binPath, "put", "obj/after", "--wait", "1m", "--identity", id, "--json")
		cmd.Env, cmd.Dir = tg.environ(), tg.dir
		cmd.Stdin = strings.NewReader("written after the release")
		var stdout bytes.Buffer
		cmd.Stdout = &stdout
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
			if strings.Contains(sc.Text(), "waiting up to 1m0s") {
				break
			}
		}
		released := time.Now()
		h.release(t)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("put --wait: %v\n%s", err, log.String())
		}
		// Polls are at most 5 s apart (jittered ±50%), plus the write.
		if took := time.Since(released); took > 20*time.Second {
			t.Errorf("the write went through %s after the release", took)
		}
		doc := decode[putDoc](t, result{stdout: stdout.String()})
		if doc.Name != "obj/after" || doc.Lock.InstanceID != instanceID() {
			t.Errorf("put --json = %+v", doc)
		}
		if got, _, err := tg.store(t, id).Get(t.Context(), "obj/after"); err != nil || string(got) != "written after the release" {
			t.Errorf("obj/after = %q, %v", got, err)
		}
	})
}

// lock status judges the holder as the lock would: a holder SIGKILLed on
// this host is dead — the next boot takes it over at once — not "live"
// (on 47d6aae it said "(live)" while the next put took the lock over).
func TestLockStatus_SIGKILLedHolderOnThisHost_ReportedDeadWithWhatTheNextBootDoes(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		id, _ := tg.keygen(t, "id.txt")
		h := tg.startHolder(t, "pod-a", id)
		st := decode[lockStatusDoc](t, tg.cli(t, nil, "lock", "status", "--identity", id, "--json").must(t, exitOK))
		if st.Liveness != string(lockadmin.Live) || !strings.Contains(st.NextBoot, "refuse") {
			t.Fatalf("lock status of a live holder = %+v", st)
		}
		h.kill(t)
		st = decode[lockStatusDoc](t, tg.cli(t, nil, "lock", "status", "--identity", id, "--json").must(t, exitOK))
		if st.Liveness != string(lockadmin.Dead) || st.Stale || !strings.Contains(st.NextBoot, "at once") || st.Holder == nil || st.Holder.InstanceID != "pod-a" {
			t.Fatalf("lock status of a SIGKILLed holder = %+v, want dead, taken over at once", st)
		}
		r := tg.cli(t, nil, "lock", "status", "--identity", id).must(t, exitOK)
		if !strings.Contains(r.stdout, `held by "pod-a" (dead)`) || !strings.Contains(r.stdout, "next boot:") {
			t.Fatalf("lock status:\n%s", r)
		}
	})
}

// lock break -h says what --force leaves open: the old holder writes until
// its next heartbeat, at most until its lease ends, and where those writes
// can land (docs/lock.md).
func TestLockBreak_Help_SaysWhatForceLeavesOpen(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		r := tg.cli(t, nil, "lock", "break", "-h").must(t, exitOK)
		text := strings.Join(strings.Fields(r.stdout), " ")
		for _, want := range []string{"a boot would not take over now", "next heartbeat", "lease ends", "conditional writes none of those writes lands over the next holder's"} {
			if !strings.Contains(text, want) {
				t.Errorf("lock break -h does not say %q:\n%s", want, r.stdout)
			}
		}
	})
}
