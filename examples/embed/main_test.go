package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairnhq/state/backend/fs"
	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/lockadmin"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/store"
)

// TestREADME_ShowsThisProgram_ByteForByte keeps the README's embedding
// example and this file the same program: the README's Go block that
// starts like this file must be this file.
func TestREADME_ShowsThisProgram_ByteForByte(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(self), "\n")
	_, block, ok := strings.Cut(string(readme), "```go\n"+first+"\n")
	if !ok {
		t.Fatalf("README.md has no ```go block starting with %q", first)
	}
	block, _, ok = strings.Cut(block, "\n```\n")
	if !ok {
		t.Fatal("the README's block does not end")
	}
	if got := first + "\n" + block + "\n"; got != string(self) {
		t.Errorf("README.md's embedding example differs from examples/embed/main.go; copy the file into the README.\nREADME:\n%s", got)
	}
}

// environ is the test's environment without cairn-state or AWS settings.
func environ(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CAIRN_STATE_") && !strings.HasPrefix(kv, "AWS_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

func TestEnvironmentUnset_ClearErrorAndNonZeroExit_NoPanic(t *testing.T) {
	bin := testkit.BuildShipped(t, "embed")
	dir := t.TempDir()
	id, _ := testkit.IdentityFile(t)
	for _, c := range []struct {
		env  []string
		want string
	}{
		{nil, "CAIRN_STATE_URL"},
		{[]string{"CAIRN_STATE_URL=file:" + filepath.Join(dir, "state")}, "CAIRN_STATE_IDENTITY"},
		{[]string{"CAIRN_STATE_URL=ftp://x", "CAIRN_STATE_IDENTITY=" + id}, "unknown scheme"},
	} {
		cmd := exec.Command(bin)
		cmd.Env, cmd.Dir = environ(c.env...), dir
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 1 {
			t.Errorf("%v: %v, want exit 1\n%s", c.env, err, out)
		}
		if !strings.HasPrefix(string(out), "app: ") || !strings.Contains(string(out), c.want) || strings.Contains(string(out), "panic") {
			t.Errorf("%v: output does not say %q clearly:\n%s", c.env, c.want, out)
		}
	}
}

func TestBoots_ServesUntilSIGTERM_ReleasesTheLock_NextBootCountsOn(t *testing.T) {
	bin := testkit.BuildShipped(t, "embed")
	dir := t.TempDir()
	id, _ := testkit.IdentityFile(t)
	env := environ("CAIRN_STATE_URL=file:"+filepath.Join(dir, "state"), "CAIRN_STATE_IDENTITY="+id)
	for boot := 1; boot <= 2; boot++ {
		cmd := exec.Command(bin)
		cmd.Env, cmd.Dir = env, dir
		p := testkit.StartProc(t, cmd)
		// The epoch grows at every acquisition: the first boot released
		// its lock, and the second counts on from the saved epoch.
		if line := p.WaitStdout(t, "", time.Minute); line != fmt.Sprintf("ready: theme=dark epoch=%d", boot) {
			t.Fatalf("boot %d: %q\n%s", boot, line, p.Stderr)
		}
		p.Signal(t, syscall.SIGTERM)
		if code := p.Wait(t, time.Minute); code != 0 {
			t.Fatalf("boot %d after SIGTERM: exit %d\n%s", boot, code, p.Stderr)
		}
		if held(t, filepath.Join(dir, "state"), id) {
			t.Errorf("boot %d: the lock was not released", boot)
		}
	}
}

// held reports whether the lock of the store in dir is held (a released
// lock object, which the fs backend's compare-and-swap mode keeps, is not).
func held(t *testing.T, dir, identityFile string) bool {
	t.Helper()
	raw, err := fs.New(dir, fs.Options{})
	ids, lerr := envelope.LoadIdentityFile(identityFile)
	if err = errors.Join(err, lerr); err != nil {
		t.Fatal(err)
	}
	st, err := store.Connect(t.Context(), raw, store.Keys{Identities: ids}, store.ConnectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := lockadmin.Inspect(t.Context(), st, lockadmin.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s.Present
}
