package main

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/cairnhq/state/internal/testkit"
)

// TestShippedExample_HasNoTestHooks builds the example as it ships (no
// build tags): the pause variable's name is not in the binary, and with the
// variable set the example boots through every migration and shuts down.
func TestShippedExample_HasNoTestHooks(t *testing.T) {
	shipped := testkit.BuildShipped(t, "instance", testPauseEnv)

	cmd := exec.Command(shipped, "--instance-id", "shipped")
	cmd.Dir = t.TempDir() // the demo store and identity go here
	cmd.Env = append(cleanEnv(), testPauseEnv+"=0002-seed-settings")
	p := testkit.StartProc(t, cmd)
	if line := p.WaitStdout(t, "", bootTimeout); !strings.HasPrefix(line, "ready: instance=shipped") {
		t.Fatalf("first line %q\n%s", line, p.Stderr)
	}
	p.Signal(t, syscall.SIGTERM)
	if code := p.Wait(t, exitTimeout); code != 143 || !strings.Contains(p.Stdout.String(), "shutdown complete") {
		t.Errorf("shutdown: exit %d %q\n%s", code, p.Stdout, p.Stderr)
	}
	if strings.Contains(p.Stderr.String(), "paused in migration") {
		t.Errorf("the shipped example paused:\n%s", p.Stderr)
	}
}
