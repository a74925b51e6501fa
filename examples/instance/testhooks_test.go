package main

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

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
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	select {
	case line := <-lines:
		if !strings.HasPrefix(line, "ready: instance=shipped") {
			t.Fatalf("first line %q\n%s", line, stderr.String())
		}
	case <-time.After(bootTimeout):
		t.Fatalf("the shipped example did not get ready with %s set:\n%s", testPauseEnv, stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var rest []string
	for line := range lines {
		rest = append(rest, line)
	}
	if err := cmd.Wait(); cmd.ProcessState.ExitCode() != 143 || !strings.Contains(strings.Join(rest, "\n"), "shutdown complete") {
		t.Errorf("shutdown: %v %q\n%s", err, rest, stderr.String())
	}
	if strings.Contains(stderr.String(), "paused in migration") {
		t.Errorf("the shipped example paused:\n%s", stderr.String())
	}
}
