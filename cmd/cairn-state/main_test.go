package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"filippo.io/age"
	"go.uber.org/goleak"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/fs"
	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/lockadmin"
	"github.com/cairnhq/state/internal/setup"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
	"github.com/cairnhq/state/testutil"
)

// binPath is the cairn-state binary built once for all tests.
var binPath string

// otherBinaryEnv names a cairn-state binary to test instead of this
// tree's (built with -tags cairntest), e.g. the baseline's.
const otherBinaryEnv = "CAIRN_STATE_CLI_TEST_BINARY"

// holderEnv makes the test binary a lock holder process instead of running
// tests (see holdLock); holderStaleEnv, when set, is the holder's stale
// window (a Go duration).
const (
	holderEnv      = "CAIRN_STATE_CLI_TEST_HOLDER"
	holderStaleEnv = "CAIRN_STATE_CLI_TEST_HOLDER_STALE_AFTER"
	// holderLegacyEnv makes the holder seal bound to no store, reading no
	// manifest: a lock the store's members cannot read.
	holderLegacyEnv = "CAIRN_STATE_CLI_TEST_HOLDER_LEGACY"
)

func TestMain(m *testing.M) {
	if id := os.Getenv(holderEnv); id != "" {
		os.Exit(holdLock(id))
	}
	dir, err := os.MkdirTemp("", "cairn-state-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "cairn-state")
	// The test build: with the pause hook of testhooks_cairntest.go.
	build := exec.Command("go", "build", "-tags", "cairntest", "-o", binPath, ".")
	if other := os.Getenv(otherBinaryEnv); other != "" {
		// Another build to run the tests against (an older commit's, to
		// show what they catch): go build -tags cairntest -o B ./cmd/cairn-state.
		binPath, build = other, exec.Command("true")
	}
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building cairn-state: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goroutine leak: %v\n", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// holdLock is the lock holder process: it takes the lock of the store named
// by CAIRN_STATE_URL with the identity of CAIRN_STATE_IDENTITY, as instance
// id, prints "held epoch=N" and holds it (heartbeating) until SIGTERM or
// SIGKILL.
func holdLock(id string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var staleAfter time.Duration
	if v := os.Getenv(holderStaleEnv); v != "" {
		var err error
		if staleAfter, err = time.ParseDuration(v); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	b, root, err := setup.OpenBackend(ctx, os.Getenv(setup.EnvURL), setup.BackendOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ids, err := envelope.LoadIdentityFile(os.Getenv(setup.EnvIdentity))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var st *store.Store
	if os.Getenv(holderLegacyEnv) != "" {
		env, eerr := envelope.New(ids, nil, envelope.Options{})
		if eerr == nil {
			st, err = storeadmin.Open(b, env, store.Options{Root: root})
		} else {
			err = eerr
		}
	} else {
		st, err = store.Connect(ctx, b, store.Keys{Identities: ids}, store.ConnectOptions{Create: true, Options: store.Options{Root: root}})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	l, err := lock.Acquire(ctx, st, lock.Options{InstanceID: id, StaleAfter: staleAfter})
	if err == nil && os.Getenv(holderLegacyEnv) == "" {
		err = storeadmin.CommitManifest(ctx, l.Fence(st))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("held epoch=%d\n", l.Record().Epoch)
	<-ctx.Done()
	_ = l.Release(context.Background())
	return 0
}

// target is one backend the CLI is run against.
type target struct {
	name string
	url  string
	root string
	env  []string        // extra environment for the CLI (S3 credentials)
	raw  backend.Backend // the same storage, for seeding and tampering
	dir  string          // a scratch directory for identity files
}

// eachBackend runs fn against a local directory, versitygw (compare-and-
// swap) and Garage (no conditional writes). The servers skip their subtest
// when their binary is missing, unless CAIRN_REQUIRE_SERVERS=1.
func eachBackend(t *testing.T, fn func(t *testing.T, tg *target)) {
	t.Run("fs", func(t *testing.T) { fn(t, fsTarget(t)) })
	for _, s := range testkit.S3Servers {
		t.Run(s.Name, func(t *testing.T) { fn(t, s3Target(t, s.Name, s.Start(t))) })
	}
}

// fsTarget is a fresh local directory store.
func fsTarget(t testing.TB) *target {
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	raw, err := fs.New(dir, fs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &target{name: "fs", url: "file://" + dir, raw: raw, dir: t.TempDir()}
}

func s3Target(t testing.TB, name string, srv *testutil.S3Server) *target {
	bucket := srv.NewBucket(t)
	const root = "apps/one"
	return &target{name: name, url: srv.URL(bucket, root), root: root, env: srv.Env(),
		raw: srv.Backend(t, bucket), dir: t.TempDir()}
}

// result is what one CLI run did.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// environ is the CLI's environment: the test's, without any cairn-state or
// AWS setting of the user, plus the target's URL and credentials.
func (tg *target) environ(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CAIRN_STATE_") && !strings.HasPrefix(kv, "AWS_") {
			env = append(env, kv)
		}
	}
	env = append(env, tg.env...)
	if tg.url != "" {
		env = append(env, setup.EnvURL+"="+tg.url)
	}
	return append(env, extra...)
}

// cli runs the binary with args and stdin, and checks what every run must
// satisfy: no identity in the output, and exactly one JSON document on
// stdout with --json.
func (tg *target) cli(t *testing.T, stdin []byte, args ...string) result {
	t.Helper()
	return tg.cliEnv(t, stdin, nil, args...)
}

func (tg *target) cliEnv(t *testing.T, stdin []byte, extraEnv []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = tg.environ(extraEnv...)
	cmd.Dir = tg.dir
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("cairn-state %s: %v", strings.Join(args, " "), err)
	}
	checkOutput(t, args, r)
	return r
}

// secretKeyInOutput matches an age secret key, in any case.
var secretKeyInOutput = regexp.MustCompile(`(?i)AGE-SECRET-KEY-1[0-9a-z]{10,}`)

// checkOutput asserts the rules every run obeys.
func checkOutput(t *testing.T, args []string, r result) {
	t.Helper()
	for _, out := range []string{r.stdout, r.stderr} {
		if secretKeyInOutput.MatchString(out) {
			t.Fatalf("cairn-state %s printed an identity:\n%s", strings.Join(args, " "), r)
		}
	}
	if hasFlag(args, "--json") {
		dec := json.NewDecoder(strings.NewReader(r.stdout))
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("cairn-state %s --json: stdout is not JSON: %v\n%s", strings.Join(args, " "), err, r)
		}
		if _, err := dec.Token(); err != io.EOF {
			t.Fatalf("cairn-state %s --json: more than one JSON document on stdout\n%s", strings.Join(args, " "), r)
		}
		// stderr carries JSON lines only.
		for line := range strings.SplitSeq(strings.TrimSuffix(r.stderr, "\n"), "\n") {
			if line != "" && !json.Valid([]byte(line)) {
				t.Fatalf("cairn-state %s --json: a stderr line that is not JSON: %q\n%s", strings.Join(args, " "), line, r)
			}
		}
	}
}

// said is what a run said on stderr, as text: with --json, the messages
// of its JSON lines, one a line.
func (r result) said() string {
	var b strings.Builder
	for line := range strings.SplitSeq(strings.TrimSuffix(r.stderr, "\n"), "\n") {
		var l struct {
			Message string `json:"message"`
			Msg     string `json:"msg"`
		}
		if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &l) == nil {
			line = l.Message + l.Msg
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

func hasFlag(args []string, flag string) bool {
	for _, a := range args {
		if a == flag {
			return true
		}
	}
	return false
}

// must fails the test unless the run exited with code.
func (r result) must(t *testing.T, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit %d, got %s", code, r)
	}
	return r
}

// decode parses the run's JSON document into v.
func decode[T any](t *testing.T, r result) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("decoding %T: %v\n%s", v, err, r)
	}
	return v
}

// keygen makes a new identity file with the CLI and returns its path and
// recipient.
func (tg *target) keygen(t *testing.T, name string) (path, recipient string) {
	t.Helper()
	path = filepath.Join(tg.dir, name)
	r := tg.cli(t, nil, "keygen", "-o", path).must(t, exitOK)
	return path, strings.TrimSpace(r.stdout)
}

// store connects to the target's store in the test process with the
// identities in files, as an application would (creating the store's
// manifest if there is none yet).
func (tg *target) store(t testing.TB, files ...string) *store.Store {
	t.Helper()
	st, err := tg.connect(t, files...)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// connect is store that returns the error: store.ErrNotMember for
// identities the store does not belong to.
func (tg *target) connect(t testing.TB, files ...string) (*store.Store, error) {
	t.Helper()
	var ids []age.Identity
	for _, f := range files {
		got, err := envelope.LoadIdentityFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got...)
	}
	ctx := context.Background()
	st, err := store.Connect(ctx, tg.raw, store.Keys{Identities: ids}, store.ConnectOptions{Create: true, Options: store.Options{Root: tg.root}})
	if err != nil {
		return nil, err
	}
	// One test process writes at a time: no lock needed to commit a new
	// store's manifest on a backend without compare-and-swap.
	if err := storeadmin.CommitManifest(ctx, st); err != nil {
		t.Fatal(err)
	}
	return st, nil
}

// key is the backend key of a state name.
func (tg *target) key(name string) string {
	if tg.root == "" {
		return store.Prefix + name
	}
	return tg.root + "/" + store.Prefix + name
}

// rawBytes reads a state object's stored bytes.
func rawBytes(t *testing.T, tg *target, name string) []byte {
	t.Helper()
	return testkit.Read(t, tg.raw, tg.key(name))
}

// rawSnapshot is every key of the target with its version.
func rawSnapshot(t *testing.T, tg *target) map[string]string {
	t.Helper()
	return testkit.Snapshot(t, tg.raw)
}

// holder is a lock holder child process.
type holder struct {
	p *testkit.Proc
}

// startHolder starts a process that takes the target's lock as instance id
// (with the default stale window) and holds it until killed; it is killed
// when the test ends.
func (tg *target) startHolder(t *testing.T, id, identity string) *holder {
	t.Helper()
	return tg.startHolderWindow(t, id, identity, 0)
}

// startHolderWindow is startHolder with the holder's stale window (zero:
// the default). The window is recorded in the lock, and nobody judges the
// lock stale before it: a holder that is to be killed and found stale
// within a test needs a short one.
func (tg *target) startHolderWindow(t *testing.T, id, identity string, staleAfter time.Duration, extraEnv ...string) *holder {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = tg.environ(append([]string{holderEnv + "=" + id, setup.EnvIdentity + "=" + identity}, extraEnv...)...)
	if staleAfter > 0 {
		cmd.Env = append(cmd.Env, holderStaleEnv+"="+staleAfter.String())
	}
	h := &holder{p: testkit.StartProc(t, cmd)}
	if line := h.p.WaitStdout(t, "", time.Minute); !strings.HasPrefix(line, "held ") {
		t.Fatalf("lock holder %s: %q", id, line)
	}
	return h
}

// startLegacyHolder starts a holder that seals bound to no store with
// identity: its lock is one the store's members cannot read.
func (tg *target) startLegacyHolder(t *testing.T, id, identity string, staleAfter time.Duration) *holder {
	t.Helper()
	return tg.startHolderWindow(t, id, identity, staleAfter, holderLegacyEnv+"=1")
}

// legacyLockHolder reads the target's lock as the legacy holder with
// identity sees it.
func (tg *target) legacyLockHolder(t *testing.T, identity string) lockadmin.Status {
	t.Helper()
	env, err := envelope.New(mustIdentities(t, identity), nil, envelope.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := storeadmin.Open(tg.raw, env, store.Options{Root: tg.root})
	if err != nil {
		t.Fatal(err)
	}
	s, err := lockadmin.Inspect(t.Context(), st, lockadmin.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// kill SIGKILLs the holder and waits for it: its lock stays behind.
func (h *holder) kill(t *testing.T) {
	t.Helper()
	_ = h.p.Cmd.Process.Kill()
	<-h.p.Done()
}

// release SIGTERMs the holder, which releases its lock, and waits for it.
func (h *holder) release(t *testing.T) {
	t.Helper()
	_ = h.p.Cmd.Process.Signal(syscall.SIGTERM)
	<-h.p.Done()
}
