package main

// These tests run the example as real processes — built once per test
// binary — against a local directory, versitygw and Garage, and send it
// real signals.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/fs"
	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/lockadmin"
	"github.com/cairnhq/state/internal/migratelog"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
	"github.com/cairnhq/state/testutil"
)

// binary is the example, built by TestMain; cli is cairn-state, for the
// operator's side of the scenarios.
var binary, cli string

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "cairn-example-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		binary = filepath.Join(dir, "instance")
		// The test build: with the migration pause of testhooks_cairntest.go.
		if out, err := exec.Command("go", "build", "-tags", "cairntest", "-o", binary, ".").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building the example: %v\n%s", err, out)
			return 1
		}
		cli = filepath.Join(dir, "cairn-state")
		if out, err := exec.Command("go", "build", "-o", cli, "../../cmd/cairn-state").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building cairn-state: %v\n%s", err, out)
			return 1
		}
		code := m.Run()
		if code == 0 {
			if err := goleak.Find(); err != nil {
				fmt.Fprintln(os.Stderr, "goroutine leak:", err)
				return 1
			}
		}
		return code
	}())
}

// testPauseEnv is the test build's hook (testhooks_cairntest.go): the named
// migration stops half-way and waits.
const testPauseEnv = "CAIRN_EXAMPLE_PAUSE_IN_MIGRATION"

// Timeouts are generous: Garage is a debug build and CPUs are shared. They
// bound failures; passing runs take a fraction of them.
const (
	bootTimeout = 60 * time.Second
	exitTimeout = 60 * time.Second
)

// target is a backend the example runs against.
type target struct {
	name string
	env  []string           // AWS_* for S3 servers
	srv  *testutil.S3Server // nil for fs
	// fresh returns the URL of a new, empty store and a raw backend with
	// the root prefix under which the test reads it.
	fresh func(t *testing.T) (url string, raw backend.Backend, root string)
}

func fsTarget() target {
	return target{name: "fs", fresh: func(t *testing.T) (string, backend.Backend, string) {
		dir := filepath.Join(t.TempDir(), "bucket")
		b, err := fs.New(dir, fs.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return "file://" + dir, b, ""
	}}
}

func s3Target(name string, srv *testutil.S3Server) target {
	return target{name: name, env: srv.Env(), srv: srv, fresh: func(t *testing.T) (string, backend.Backend, string) {
		bucket := srv.NewBucket(t)
		return srv.URL(bucket, "apps/demo"), srv.Backend(t, bucket), "apps/demo"
	}}
}

// forEachTarget runs the scenarios against every backend, starting each
// server once.
func forEachTarget(t *testing.T, scenarios func(t *testing.T, tg target)) {
	t.Run("fs", func(t *testing.T) { scenarios(t, fsTarget()) })
	for _, s := range testkit.S3Servers {
		t.Run(s.Name, func(t *testing.T) { scenarios(t, s3Target(s.Name, s.Start(t))) })
	}
}

func TestExample(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		t.Run("SecondInstance_ExitsThreeNamingTheFirst", func(t *testing.T) { testSecondInstance(t, tg) })
		t.Run("SIGTERMOrSIGINT_ReleasesAndNextInstanceBootsAtOnce", func(t *testing.T) { testSIGTERM(t, tg) })
		t.Run("SIGKILL_RestartWithSameIDBootsAtOnce", func(t *testing.T) { testSIGKILL(t, tg) })
		t.Run("DeleteTheVolume_LegacyStateImportedAndFoundOnAFreshMachine", func(t *testing.T) { testDeleteTheVolume(t, tg) })
		t.Run("SIGKILLMidMigration_RestartRerunsItCleanly", func(t *testing.T) { testKilledMidMigration(t, tg) })
		t.Run("PausedPastStaleWindow_LosesLockAndExitsFour", func(t *testing.T) { testLostLock(t, tg) })
	})
}

// A scenario's world: one store and one identity, kept off every machine
// directory (as an operator keeps the key in a password manager).
type world struct {
	tg       target
	url      string
	raw      backend.Backend
	root     string
	identity string
}

func newWorld(t *testing.T, tg target) *world {
	t.Helper()
	url, raw, root := tg.fresh(t)
	return &world{tg: tg, url: url, raw: raw, root: root, identity: newKey(t)}
}

// start runs the example in machineDir (a fresh one when empty) as
// instance id, with extra flags and environment.
func (w *world) start(t *testing.T, machineDir, id string, extraEnv []string, flags ...string) *testkit.Proc {
	t.Helper()
	if machineDir == "" {
		machineDir = t.TempDir()
	}
	args := append([]string{"--url", w.url, "--identity", w.identity, "--instance-id", id}, flags...)
	env := append(cleanEnv(), w.tg.env...)
	return startProc(t, machineDir, append(env, extraEnv...), args...)
}

// store opens the scenario's store in the test process, to check what the
// instances left there.
func (w *world) store(t *testing.T) *store.Store {
	t.Helper()
	ids, err := envelope.LoadIdentityFile(w.identity)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Connect(context.Background(), w.raw, store.Keys{Identities: ids}, store.ConnectOptions{Options: store.Options{Root: w.root}})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// wantReleased fails unless nobody holds the lock: released, its claims
// deleted (claims mode) or a released record left (compare-and-swap mode,
// docs/adr/0066).
func (w *world) wantReleased(t *testing.T, when string) {
	t.Helper()
	s, err := lockadmin.Inspect(context.Background(), w.store(t), lockadmin.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Present {
		t.Fatalf("lock %s: %+v, want it released", when, s)
	}
}

func (w *world) get(t *testing.T, name string) (string, bool) {
	t.Helper()
	ids, err := envelope.LoadIdentityFile(w.identity)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Connect(context.Background(), w.raw, store.Keys{Identities: ids}, store.ConnectOptions{Options: store.Options{Root: w.root}})
	if errors.Is(err, store.ErrNoStore) {
		return "", false // no store, so no object either
	}
	if err != nil {
		t.Fatal(err)
	}
	v, _, err := st.Get(context.Background(), name)
	if errors.Is(err, store.ErrNotFound) {
		return "", false
	}
	if err != nil {
		t.Fatalf("reading %q from the store: %v", name, err)
	}
	return string(v), true
}

var readyRE = regexp.MustCompile(`^ready: instance=(\S+) epoch=(\d+) boots=(\d+)$`)

// ready waits for the ready line and returns its epoch and boot count.
func ready(t *testing.T, p *testkit.Proc, id string) (epoch, boots int) {
	t.Helper()
	line := p.WaitStdout(t, "ready:", bootTimeout)
	m := readyRE.FindStringSubmatch(line)
	if m == nil || m[1] != id {
		t.Fatalf("ready line %q, want instance=%s", line, id)
	}
	epoch, _ = strconv.Atoi(m[2])
	boots, _ = strconv.Atoi(m[3])
	return epoch, boots
}

// shutdown sends SIGTERM and expects a graceful exit.
func shutdown(t *testing.T, p *testkit.Proc) {
	t.Helper()
	shutdownWith(t, p, syscall.SIGTERM)
}

// shutdownWith sends sig and expects a graceful exit: the lock released,
// then 128 + the signal's number (130, 143), as cairn-state exits.
func shutdownWith(t *testing.T, p *testkit.Proc, sig syscall.Signal) {
	t.Helper()
	p.Signal(t, sig)
	if code := p.Wait(t, exitTimeout); code != 128+int(sig) {
		t.Fatalf("exit code after %v = %d, want %d\nstderr:\n%s", sig, code, 128+int(sig), p.Stderr.String())
	}
	if !strings.Contains(p.Stdout.String(), "shutdown complete\n") {
		t.Fatalf("no \"shutdown complete\" line; stdout:\n%s", p.Stdout.String())
	}
}

func testSecondInstance(t *testing.T, tg target) {
	w := newWorld(t, tg)
	a := w.start(t, "", "inst-a", nil)
	ready(t, a, "inst-a")

	b := w.start(t, "", "inst-b", nil)
	if code := b.Wait(t, exitTimeout); code != 3 {
		t.Fatalf("second instance exit code = %d, want 3\nstderr:\n%s", code, b.Stderr.String())
	}
	want := fmt.Sprintf(`state lock held by "inst-a" (pid %d on host `, a.Cmd.Process.Pid)
	if !strings.Contains(b.Stderr.String(), want) {
		t.Fatalf("refusal does not name the holder (%s):\n%s", want, b.Stderr.String())
	}
	if strings.Contains(b.Stdout.String(), "ready:") {
		t.Fatal("the refused instance printed ready")
	}
	t.Logf("refusal: %s", lastLine(b.Stderr.String()))
	// The first instance is unharmed and still owns its lock.
	if v, _ := w.get(t, "boots"); v != "1" {
		t.Fatalf("boots = %q after the refused boot, want 1", v)
	}
	shutdown(t, a)
}

func testSIGTERM(t *testing.T, tg target) {
	w := newWorld(t, tg)
	a := w.start(t, "", "inst-a", nil)
	ready(t, a, "inst-a")
	shutdown(t, a)
	// Released, not merely dead: on the same host a dead holder's lock
	// would be taken over at once too, so check the lock itself.
	w.wantReleased(t, "after a graceful shutdown")

	began := time.Now()
	b := w.start(t, "", "inst-b", nil)
	_, boots := ready(t, b, "inst-b")
	if boots != 2 {
		t.Fatalf("boots = %d, want 2", boots)
	}
	t.Logf("next instance ready %s after the previous shutdown", time.Since(began).Round(time.Millisecond))
	shutdownWith(t, b, syscall.SIGINT) // Ctrl-C is a graceful shutdown too
	w.wantReleased(t, "after SIGINT")
}

func testSIGKILL(t *testing.T, tg target) {
	w := newWorld(t, tg)
	a := w.start(t, "", "pod-1", nil)
	epoch1, _ := ready(t, a, "pod-1")
	a.Signal(t, syscall.SIGKILL)
	if code := a.Wait(t, exitTimeout); code != -1 {
		t.Fatalf("exit code = %d, want death by signal", code)
	}

	// The restarted container keeps its host name (instance id) and takes
	// its own, still fresh, lock back at once.
	again := w.start(t, "", "pod-1", nil)
	epoch2, boots := ready(t, again, "pod-1")
	if boots != 2 || epoch2 <= epoch1 {
		t.Fatalf("after restart: epoch %d → %d, boots %d; want a higher epoch and boots=2", epoch1, epoch2, boots)
	}
	shutdown(t, again)
}

func testDeleteTheVolume(t *testing.T, tg target) {
	w := newWorld(t, tg)
	legacy := map[string]string{
		"config.json":          `{"site":"example.org"}`,
		"keys/signing.pem":     "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIJ+not+a+real+key\n-----END PRIVATE KEY-----\n",
		"db/sessions.db":       strings.Repeat("session-row;", 5000),
		"tokens/api token.txt": "t0k3n é",
	}
	machine1 := t.TempDir()
	for name, v := range legacy {
		p := filepath.Join(machine1, legacyDir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	first := w.start(t, machine1, "app", nil)
	ready(t, first, "app")
	if !strings.Contains(first.Stderr.String(), "files=4 written=4") {
		t.Errorf("import summary missing:\n%s", first.Stderr.String())
	}
	shutdown(t, first)
	// The import never deletes its source.
	if _, err := os.Stat(filepath.Join(machine1, legacyDir, "config.json")); err != nil {
		t.Fatalf("legacy file gone after the import: %v", err)
	}

	// Delete the volume: the whole machine directory goes.
	if err := os.RemoveAll(machine1); err != nil {
		t.Fatal(err)
	}

	machine2 := t.TempDir()
	second := w.start(t, machine2, "app", nil)
	_, boots := ready(t, second, "app")
	if boots != 2 {
		t.Fatalf("boots on the fresh machine = %d, want 2", boots)
	}
	if !strings.Contains(second.Stderr.String(), "migrations: nothing to do") {
		t.Errorf("the fresh machine re-ran migrations:\n%s", second.Stderr.String())
	}
	shutdown(t, second)
	for name, want := range legacy {
		if got, ok := w.get(t, "legacy/"+name); !ok || got != want {
			t.Errorf("legacy/%s = %q (present %v), want the legacy file's content", name, got, ok)
		}
	}
	if entries, _ := os.ReadDir(machine2); len(entries) != 0 {
		t.Errorf("the instance wrote to its machine directory: %v", entries)
	}
}

func testKilledMidMigration(t *testing.T, tg target) {
	w := newWorld(t, tg)
	p := w.start(t, "", "app", []string{testPauseEnv + "=0002-seed-settings"})
	p.WaitStderr(t, "paused in migration 0002-seed-settings", bootTimeout)
	p.Signal(t, syscall.SIGKILL)
	if code := p.Wait(t, exitTimeout); code != -1 {
		t.Fatalf("exit code = %d, want death by signal", code)
	}
	st := w.store(t)
	recs, err := migratelog.Applied(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].State != migratelog.StateApplied || recs[1].State != migratelog.StateStarted {
		t.Fatalf("log after the kill = %+v, want 0001 applied and 0002 started", recs)
	}
	if _, ok := w.get(t, "settings/greeting"); !ok {
		t.Fatal("the step's first write is missing")
	}
	if _, ok := w.get(t, "settings/theme"); ok {
		t.Fatal("the step got further than its pause")
	}

	again := w.start(t, "", "app", nil)
	ready(t, again, "app")
	log := again.Stderr.String()
	for _, want := range []string{"did not finish before; running it again", "id=0002-seed-settings", "previous_state=started"} {
		if !strings.Contains(log, want) {
			t.Errorf("restart does not say %q:\n%s", want, log)
		}
	}
	shutdown(t, again)
	for name, want := range map[string]string{"settings/greeting": "hello", "settings/theme": "dark", "settings/limits": `{"max_users":10}`} {
		if got, _ := w.get(t, name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	recs, _ = migratelog.Applied(context.Background(), w.store(t))
	if recs[1].State != migratelog.StateApplied || recs[1].Attempts != 2 {
		t.Fatalf("record after the clean re-run = %+v", recs[1])
	}
}

func testLostLock(t *testing.T, tg target) {
	w := newWorld(t, tg)
	// A heartbeat a loaded machine keeps: at 500 ms, a first boot's
	// migrations on Garage outlasted one and were paused (exit 1 before
	// "ready:", at a load average of 35).
	timing := []string{"--heartbeat", "1s", "--stale-after", "6s"}
	a := w.start(t, "", "inst-a", nil, timing...)
	ready(t, a, "inst-a")

	// inst-a stops heartbeating (paused, as by a frozen VM or SIGSTOP)...
	a.Signal(t, syscall.SIGSTOP)
	// ...and inst-b is refused until the lock goes stale, then takes over.
	var b *testkit.Proc
	deadline := time.Now().Add(bootTimeout)
	for b == nil {
		c := w.start(t, "", "inst-b", nil, timing...)
		select {
		case <-c.Done():
			if code := c.ExitCode(); code != 3 {
				t.Fatalf("inst-b exit code = %d, want 3 while the lock is live\n%s", code, c.Stderr.String())
			}
			if time.Now().After(deadline) {
				t.Fatal("inst-b never took over the stale lock")
			}
			time.Sleep(500 * time.Millisecond)
		case <-c.StdoutLine("ready:"):
			b = c
		}
	}
	ready(t, b, "inst-b")

	a.Signal(t, syscall.SIGCONT)
	if code := a.Wait(t, exitTimeout); code != 4 {
		t.Fatalf("inst-a exit code after losing the lock = %d, want 4\nstderr:\n%s", code, a.Stderr.String())
	}
	if msg := a.Stderr.String(); !strings.Contains(msg, "state lock lost") || !strings.Contains(msg, `"inst-b"`) {
		t.Fatalf("inst-a does not report the loss naming inst-b:\n%s", msg)
	}
	t.Logf("loss: %s", lastLine(a.Stderr.String()))
	// inst-a left inst-b's lock alone: inst-b releases its own lock cleanly.
	shutdown(t, b)
	if strings.Contains(b.Stderr.String(), "not ours at release") {
		t.Fatalf("inst-b's lock was disturbed:\n%s", b.Stderr.String())
	}
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndex(s, "\n")+1:]
}

// cleanEnv is the test's environment without CAIRN_STATE_* and AWS_*
// variables, so that nothing from the developer's shell leaks in.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "CAIRN_STATE_") || strings.HasPrefix(kv, "AWS_") || strings.HasPrefix(kv, testPauseEnv+"=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// startProc starts the example in dir with env and args (testkit.StartProc).
func startProc(t *testing.T, dir string, env []string, args ...string) *testkit.Proc {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir, cmd.Env = dir, env
	return testkit.StartProc(t, cmd)
}

func TestExample_NoFlags_UsesTheDemoDirectoryAndCreatesAnIdentity0600(t *testing.T) {
	machine := t.TempDir()
	for boot := 1; boot <= 2; boot++ {
		p := startProc(t, machine, cleanEnv(), "--instance-id", "demo")
		if _, boots := ready(t, p, "demo"); boots != boot {
			t.Fatalf("run %d: boots = %d", boot, boots)
		}
		shutdown(t, p)
		created := strings.Contains(p.Stderr.String(), "created demo identity")
		if created != (boot == 1) {
			t.Fatalf("run %d: identity created = %v\n%s", boot, created, p.Stderr.String())
		}
	}
	fi, err := os.Stat(filepath.Join(machine, demoIdentity))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("demo identity: %v, %v; want mode 0600", fi, err)
	}
	if _, err := os.Stat(filepath.Join(machine, demoDir, "state")); err != nil {
		t.Fatalf("demo state directory: %v", err)
	}
}

func TestExample_UsageErrors_ExitTwo(t *testing.T) {
	for _, args := range [][]string{{"--no-such-flag"}, {"--heartbeat", "soon"}, {"extra-argument"}} {
		p := startProc(t, t.TempDir(), cleanEnv(), args...)
		if code := p.Wait(t, exitTimeout); code != 2 {
			t.Errorf("%q: exit code %d, want 2\n%s", args, code, p.Stderr.String())
		}
	}
}

// `timeout`, shells and init systems may deliver SIGTERM twice in a row (to
// the process and to its group); the second must not cut the release short.
func TestExample_SIGTERMTwice_StillReleasesAndExits143(t *testing.T) {
	w := newWorld(t, fsTarget())
	a := w.start(t, "", "inst-a", nil)
	ready(t, a, "inst-a")
	// Keep signalling while it shuts down: signals sent at once coalesce,
	// so space them to land during Close. Errors after exit are expected.
	for range 500 {
		_ = a.Cmd.Process.Signal(syscall.SIGTERM)
		time.Sleep(100 * time.Microsecond)
	}
	if code := a.Wait(t, exitTimeout); code != 143 {
		t.Fatalf("exit code after two SIGTERMs = %d, want 143\nstderr:\n%s", code, a.Stderr.String())
	}
	if !strings.Contains(a.Stdout.String(), "shutdown complete\n") {
		t.Fatalf("no \"shutdown complete\" line; stdout:\n%s", a.Stdout.String())
	}
	w.wantReleased(t, "after the shutdown")
}

// The hint after a refusal under this instance's own id reads the
// situation: the holder on this host or another, the id chosen or the host
// name's.
func TestDuplicateHint_ReadsTheSituation(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Skip(err)
	}
	for _, c := range []struct {
		holderHost string
		idGiven    bool
		want       string
	}{
		{host, false, "this instance already runs on this host (pid 42): stop it"},
		{host, true, `process 42 on this host already runs with --instance-id "pod-a"`},
		{"other-machine", false, "the id defaults to the host name, and the two machines share it"},
		{"other-machine", true, `host other-machine runs an instance with the same --instance-id "pod-a": give each machine its own`},
	} {
		held := &lock.HeldError{Duplicate: true, Holder: lock.Record{InstanceID: "pod-a", Hostname: c.holderHost, PID: 42}}
		if got := duplicateHint(held, c.idGiven); !strings.Contains(got, c.want) {
			t.Errorf("holder on %s, id given %v: %q, want it to say %q", c.holderHost, c.idGiven, got, c.want)
		}
		if c.holderHost == host && strings.Contains(duplicateHint(held, c.idGiven), "give each instance its own") {
			t.Errorf("a second copy on this host is told to change ids")
		}
	}
}
