package lock_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/cairnhq/state/internal/lockadmin"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
	"github.com/cairnhq/state/testutil/garage"
	"github.com/cairnhq/state/testutil/versitygw"
)

// world is one store reachable by this process and by child processes.
type world struct {
	url      string   // for children
	env      []string // extra environment for children (credentials)
	identity string   // identity file path
	stale    time.Duration
	st       *store.Store // this process's view
}

type worldMaker struct {
	name string
	make func(t *testing.T) *world
}

// The stale windows of the worlds of processes (heartbeats at a quarter,
// requests allowed half a heartbeat): sized for two loaded cores, where a
// child under -race took over a second for a Garage request and a
// heartbeat a quarter-heartbeat late suspended the fence or let a same-id
// watcher take over after 1.5 heartbeats (seen with 2 s on fs and 4 s on
// the servers while other test runs shared the machine).
const (
	fsWorldStale = 8 * time.Second
	s3WorldStale = 12 * time.Second
)

func worlds() []worldMaker {
	return []worldMaker{
		{"fs", func(t *testing.T) *world {
			dir := t.TempDir()
			return newWorld(t, "file:"+dir, nil, fsWorldStale)
		}},
		{"versitygw", func(t *testing.T) *world {
			srv := versitygw.Start(t)
			return newWorld(t, srv.URL(srv.NewBucket(t), "app"), srv.Env(), s3WorldStale)
		}},
		{"garage", func(t *testing.T) *world {
			srv := garage.Start(t)
			return newWorld(t, srv.URL(srv.NewBucket(t), "app"), srv.Env(), s3WorldStale)
		}},
	}
}

func newWorld(t *testing.T, url string, env []string, stale time.Duration) *world {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "identity.txt")
	if err := os.WriteFile(path, []byte(id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w := &world{url: url, env: env, identity: path, stale: stale}
	// This process reaches the S3 servers with the credentials its
	// children get from their environment.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	environ := env
	if environ == nil {
		environ = []string{}
	}
	w.st, err = openStore(ctx, url, path, slog.New(slog.NewTextHandler(t.Output(), nil)), environ)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) opts(id string) lock.Options {
	return lock.Options{InstanceID: id, StaleAfter: w.stale, HeartbeatInterval: w.stale / 4,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
}

// child is a lock holder in another process.
type child struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *testkit.SyncBuffer
	exited chan struct{}
	err    error // Wait's result, after exited
}

// lineWriter sends complete lines to a channel.
type lineWriter struct {
	partial []byte
	ch      chan string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.ch <- string(w.partial[:i])
		w.partial = w.partial[i+1:]
	}
}

// startChild runs a lock holder with instance id. otherPod puts it in new
// UTS and PID namespaces with its own hostname: to the lock it is another
// machine, whose PID this process cannot probe.
func startChild(t *testing.T, w *world, id string, otherPod bool) *child {
	t.Helper()
	c := childSpec{id: id}
	if otherPod {
		c.hostname = id + "-host"
	}
	return c.start(t, w)
}

// childSpec says how to run a lock holder in another process.
type childSpec struct {
	id        string        // instance id; empty: the default (the hostname)
	hostname  string        // non-empty: new UTS and PID namespaces with this hostname ("another pod")
	write     bool          // write through the fenced store while holding
	identity  string        // identity file; empty: the world's
	heartbeat time.Duration // zero: a quarter of the world's stale window
}

func (cs childSpec) start(t *testing.T, w *world) *child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	identity, hb := cs.identity, cs.heartbeat
	if identity == "" {
		identity = w.identity
	}
	if hb == 0 {
		hb = w.stale / 4
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), w.env...)
	cmd.Env = append(cmd.Env,
		childEnv+"=1", childURL+"="+w.url, childIdentity+"="+identity, childInstance+"="+cs.id,
		childStale+"="+w.stale.String(), childHeartbeat+"="+hb.String())
	if cs.write {
		cmd.Env = append(cmd.Env, childWrite+"=1")
	}
	otherPod := cs.hostname != ""
	if otherPod {
		cmd.Env = append(cmd.Env, childHostname+"="+cs.hostname)
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUTS | syscall.CLONE_NEWPID}
	}
	c := &child{cmd: cmd, lines: make(chan string, 16), stderr: new(testkit.SyncBuffer), exited: make(chan struct{})}
	cmd.Stdout = &lineWriter{ch: c.lines}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		if otherPod && errors.Is(err, syscall.EPERM) {
			t.Skipf("cannot create UTS and PID namespaces here (needs root or user namespaces): %v", err)
		}
		t.Fatal(err)
	}
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-c.exited
		if t.Failed() {
			// Every child's log, not only the one whose line failed.
			t.Logf("child %q (pid %d) stderr:\n%s", cs.id+cs.hostname, cmd.Process.Pid, c.stderr.String())
		}
	})
	return c
}

// expect waits for the child's next line and checks its prefix.
func (c *child) expect(t *testing.T, prefix string) string {
	t.Helper()
	select {
	case line := <-c.lines:
		if !strings.HasPrefix(line, prefix) {
			t.Fatalf("child said %q, want %q…\nstderr:\n%s", line, prefix, c.stderr.String())
		}
		return line
	case <-time.After(60 * time.Second):
		t.Fatalf("child said nothing (want %q…)\nstderr:\n%s", prefix, c.stderr.String())
	}
	return ""
}

func (c *child) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-c.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("child did not exit\nstderr:\n%s", c.stderr.String())
	}
	var ee *exec.ExitError
	if errors.As(c.err, &ee) {
		return ee.ExitCode()
	}
	return 0
}

// forEachWorld runs fn on fs, versitygw and Garage, in parallel, the whole
// test in parallel with the package's other parallel tests: each world has
// its own server and store, and the cases mostly wait.
func forEachWorld(t *testing.T, fn func(t *testing.T, w *world)) {
	t.Parallel()
	for _, wm := range worlds() {
		if testing.Short() && wm.name != "fs" {
			continue // -short: fs only; make test runs every world
		}
		t.Run(wm.name, func(t *testing.T) {
			t.Parallel()
			fn(t, wm.make(t))
		})
	}
}

func acquireT(t *testing.T, w *world, o lock.Options) *lock.Lock {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := lock.Acquire(ctx, w.st, o)
	if err != nil {
		t.Fatalf("Acquire(%s): %v", o.InstanceID, err)
	}
	t.Cleanup(func() { _ = l.Release(context.Background()) })
	return l
}

func refusedBy(t *testing.T, w *world, id, holder string) {
	t.Helper()
	_, err := lock.Acquire(context.Background(), w.st, w.opts(id))
	var he *lock.HeldError
	if !errors.As(err, &he) || he.Holder.InstanceID != holder {
		t.Fatalf("Acquire(%s) = %v, want refusal naming %q", id, err, holder)
	}
}

func TestDeadHolderSameHost_SIGKILL_TakenOverAtOnce(t *testing.T) {
	forEachWorld(t, func(t *testing.T, w *world) {
		w.stale = time.Hour // only the dead-PID rule can free it
		c := startChild(t, w, "pod-a", false)
		c.expect(t, "held epoch=1")
		refusedBy(t, w, "pod-b", "pod-a") // alive, same host: refused
		if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		c.wait(t) // reaped: the PID is gone
		start := time.Now()
		l := acquireT(t, w, w.opts("pod-b"))
		if l.Record().Epoch != 2 {
			t.Fatalf("epoch %d, want 2", l.Record().Epoch)
		}
		t.Logf("took over a SIGKILLed same-host holder's lock in %s (stale horizon %s)", time.Since(start).Round(time.Millisecond), w.stale)
	})
}

func TestRollout_SIGTERM_OldReleasesNewBootsAtOnce(t *testing.T) {
	forEachWorld(t, func(t *testing.T, w *world) {
		w.stale = time.Hour
		old := startChild(t, w, "pod-old", true)
		old.expect(t, "held epoch=1")
		refusedBy(t, w, "pod-new", "pod-old")
		if err := old.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		old.expect(t, "released")
		if code := old.wait(t); code != 0 {
			t.Fatalf("old pod exit code %d", code)
		}
		// The lock object is gone, its epoch saved: the next one counts on.
		if s, err := lockadmin.Inspect(context.Background(), w.st, lockadmin.InspectOptions{StaleAfter: w.stale}); err != nil || s.Present {
			t.Fatalf("lock after a clean release: %+v, %v", s, err)
		}
		l := acquireT(t, w, w.opts("pod-new"))
		if l.Record().Epoch != 2 {
			t.Fatalf("epoch %d after a clean release of epoch 1, want 2", l.Record().Epoch)
		}
	})
}

func TestRollout_SIGKILLOtherPod_RefusedUntilStaleThenTakeover(t *testing.T) {
	forEachWorld(t, func(t *testing.T, w *world) {
		old := startChild(t, w, "pod-old", true)
		old.expect(t, "held epoch=1")
		if err := old.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		old.wait(t)
		killed := time.Now()
		refusedBy(t, w, "pod-new", "pod-old") // another pod's PID is not probed
		o := w.opts("pod-new")
		o.WaitForStale = true
		l := acquireT(t, w, o)
		waited := time.Since(killed)
		if waited < w.stale-w.stale/4-time.Second {
			t.Fatalf("took over after %s, before the stale horizon %s", waited, w.stale)
		}
		if l.Record().Epoch != 2 {
			t.Fatalf("epoch %d, want 2", l.Record().Epoch)
		}
		t.Logf("refused until stale, took over %s after the SIGKILL (stale after %s)", waited.Round(time.Millisecond), w.stale)
	})
}

func TestPausedHolder_SIGSTOP_LosesLockAndStopsWriting(t *testing.T) {
	forEachWorld(t, func(t *testing.T, w *world) {
		old := startChild(t, w, "pod-old", true)
		old.expect(t, "held epoch=1")
		if err := old.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		o := w.opts("pod-new")
		o.WaitForStale = true
		l := acquireT(t, w, o)
		if err := old.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		line := old.expect(t, "lost: ")
		if !strings.Contains(line, "write: store:") || !strings.Contains(line, "no longer holds the state lock") {
			t.Fatalf("resumed holder's write was not refused: %q", line)
		}
		if code := old.wait(t); code != 4 {
			t.Fatalf("exit code %d, want 4", code)
		}
		s, err := lockadmin.Inspect(context.Background(), w.st, lockadmin.InspectOptions{StaleAfter: w.stale})
		if err != nil || s.Record.AcquisitionID != l.Record().AcquisitionID {
			t.Fatalf("lock after the old holder resumed: %+v, %v", s, err)
		}
		if _, _, err := w.st.Get(context.Background(), "app"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("the paused holder's late write landed: %v", err)
		}
		fmt.Fprintln(os.Stderr) // keep the child's log apart
	})
}
