package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairnhq/state/internal/testkit"
)

// TestExitCodes_OneCasePerRowOfTheTable runs, for every row of exitTable
// (the table `cairn-state help` prints), a command line that must exit
// with that code, through the built binary; a row without a case, or a
// case without a row, fails.
func TestExitCodes_OneCasePerRowOfTheTable(t *testing.T) {
	cases := map[int]func(t *testing.T){
		exitOK: func(t *testing.T) {
			tg := fsTarget(t)
			tg.cli(t, nil, "version").must(t, exitOK)
			id, _ := tg.keygen(t, "id.txt")
			tg.startHolder(t, "pod-a", id)
			tg.cli(t, nil, "lock", "status", "--identity", id).must(t, exitOK) // held or not
		},
		exitFail: func(t *testing.T) {
			tg := fsTarget(t)
			id, _ := tg.keygen(t, "id.txt")
			seed(t, tg, 1, id)
			tg.cli(t, nil, "get", "app/missing", "--identity", id).must(t, exitFail)
		},
		exitUsage: func(t *testing.T) {
			tg := fsTarget(t)
			id, _ := tg.keygen(t, "id.txt")
			seed(t, tg, 1, id)
			for what, args := range map[string][]string{
				"a bad flag":              {"ls", "--colour"},
				"a bad URL":               {"ls", "--url", "gopher://x/y"},
				"a missing identity file": {"get", "obj/000", "--identity", filepath.Join(tg.dir, "missing.txt")},
				"a missing identity":      {"get", "obj/000"},
			} {
				if r := tg.cli(t, nil, args...); r.code != exitUsage {
					t.Errorf("%s: want exit %d, got %s", what, exitUsage, r)
				}
			}
		},
		exitHeld: func(t *testing.T) {
			tg := fsTarget(t)
			id, _ := tg.keygen(t, "id.txt")
			seed(t, tg, 1, id)
			tg.startHolder(t, "pod-a", id)
			tg.cli(t, []byte("v"), "put", "app/x", "--identity", id).must(t, exitHeld)
		},
		exitLockLost: testExampleLostLockExits4,
		exitNotMember: func(t *testing.T) {
			tg := fsTarget(t)
			id, _ := tg.keygen(t, "id.txt")
			stranger, _ := tg.keygen(t, "stranger.txt")
			seed(t, tg, 1, id)
			tg.cli(t, nil, "get", "obj/000", "--identity", stranger).must(t, exitNotMember)
		},
		exitNoStore: func(t *testing.T) {
			dir := t.TempDir()
			tg := &target{dir: dir, url: "file:" + filepath.Join(dir, "no-store-here")}
			id, _ := tg.keygen(t, "id.txt")
			tg.cli(t, nil, "ls", "--identity", id).must(t, exitNoStore)
			if _, err := os.Stat(filepath.Join(dir, "no-store-here")); !os.IsNotExist(err) {
				t.Errorf("ls on a missing store created it: %v", err)
			}
		},
		exitCondition: func(t *testing.T) {
			tg := fsTarget(t)
			id, _ := tg.keygen(t, "id.txt")
			seed(t, tg, 1, id)
			tg.cli(t, []byte("v"), "put", "--if-absent", "obj/000", "--identity", id).must(t, exitCondition)
		},
		exitSIGINT:  func(t *testing.T) { testSignalReleasesThenExits(t, syscall.SIGINT) },
		exitSIGTERM: func(t *testing.T) { testSignalReleasesThenExits(t, syscall.SIGTERM) },
	}
	for _, row := range exitTable {
		fn, ok := cases[row.code]
		if !ok {
			t.Errorf("exit code %d (%s) has no test case", row.code, row.meaning)
			continue
		}
		delete(cases, row.code)
		t.Run("exit_"+strconv.Itoa(row.code), fn)
	}
	for code := range cases {
		t.Errorf("a test case for exit code %d, which the table does not list", code)
	}
}

// testSignalReleasesThenExits interrupts a rekey that holds the lock:
// it releases the lock, then exits 128 + the signal.
func testSignalReleasesThenExits(t *testing.T, sig syscall.Signal) {
	tg := fsTarget(t)
	oldID, _ := tg.keygen(t, "old.txt")
	newID, _ := tg.keygen(t, "new.txt")
	seed(t, tg, 10, oldID)
	p := tg.startPausedRekey(t, 3, "--identity", newID, "--old-identity", oldID)
	if code, rest := p.stop(sig); code != 128+int(sig) {
		t.Fatalf("rekey after %v: exit %d, want %d\n%s", sig, code, 128+int(sig), rest)
	}
	if st := decode[lockStatusDoc](t, tg.cli(t, nil, "lock", "status", "--json", "--identity", newID).must(t, exitOK)); st.Present {
		t.Errorf("the lock is still there after %v: %+v", sig, st)
	}
}

var (
	exampleOnce sync.Once
	exampleBin  string
	exampleErr  error
)

// exampleBinary builds examples/instance once.
func exampleBinary(t *testing.T) string {
	t.Helper()
	exampleOnce.Do(func() {
		exampleBin = filepath.Join(filepath.Dir(binPath), "instance")
		out, err := exec.Command("go", "build", "-o", exampleBin, "../../examples/instance").CombinedOutput()
		if err != nil {
			exampleErr = err
			exampleBin = string(out)
		}
	})
	if exampleErr != nil {
		t.Fatalf("building the example: %v\n%s", exampleErr, exampleBin)
	}
	return exampleBin
}

// startExample starts the example application on the target's store as
// instance id, with a short heartbeat and stale window.
func startExample(t *testing.T, tg *target, id, identity string) *testkit.Proc {
	t.Helper()
	cmd := exec.Command(exampleBinary(t), "--url", tg.url, "--identity", identity, "--instance-id", id,
		"--heartbeat", "500ms", "--stale-after", "3s")
	cmd.Env, cmd.Dir = tg.environ(), t.TempDir()
	return testkit.StartProc(t, cmd)
}

// testExampleLostLockExits4: the example, paused past its stale window
// while another instance takes over, loses its lock and exits 4.
func testExampleLostLockExits4(t *testing.T) {
	tg := fsTarget(t)
	id, _ := tg.keygen(t, "id.txt")
	a := startExample(t, tg, "inst-a", id)
	a.WaitStdout(t, "ready:", time.Minute)
	a.Signal(t, syscall.SIGSTOP)
	var b *testkit.Proc
	for deadline := time.Now().Add(time.Minute); b == nil; {
		c := startExample(t, tg, "inst-b", id)
		select {
		case <-c.StdoutLine("ready:"):
			b = c
		case <-c.Done():
			if code := c.ExitCode(); code != exitHeld {
				t.Fatalf("inst-b exit %d while the lock was live, want %d: %s", code, exitHeld, c.Stderr)
			}
			if time.Now().After(deadline) {
				t.Fatal("inst-b never took over the stale lock")
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	a.Signal(t, syscall.SIGCONT)
	if code := a.Wait(t, time.Minute); code != exitLockLost {
		t.Fatalf("inst-a after losing its lock: exit %d, want %d\n%s", code, exitLockLost, a.Stderr)
	}
	// And the example's graceful shutdown has the CLI's signal code.
	b.Signal(t, syscall.SIGTERM)
	if code := b.Wait(t, time.Minute); code != exitSIGTERM {
		t.Errorf("inst-b after SIGTERM: exit %d, want %d\n%s", code, exitSIGTERM, b.Stderr)
	}
}
