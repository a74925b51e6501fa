package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/cairnhq/state/internal/testkit"
)

// TestShippedBinary_HasNoTestHooks builds cairn-state as it ships (no build
// tags) and checks that the rekey pause hook is not in it: the variable's
// name is absent from the binary, the build records no cairntest tag (the
// test build does), and a rekey with the variable set does not pause.
func TestShippedBinary_HasNoTestHooks(t *testing.T) {
	shipped := testkit.BuildShipped(t, "cairn-state", pauseEnv)
	tags := func(bin string) string {
		out, err := exec.Command("go", "version", "-m", bin).Output()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(string(out), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "build" && strings.HasPrefix(f[1], "-tags=") {
				return f[1]
			}
		}
		return ""
	}
	if got := tags(shipped); strings.Contains(got, "cairntest") {
		t.Errorf("the shipped build records %s", got)
	}
	if got := tags(binPath); !strings.Contains(got, "cairntest") {
		t.Errorf("the test build records %q, want -tags=cairntest (is the hook tested at all?)", got)
	}

	tg := fsTarget(t)
	id, _ := tg.keygen(t, "id.txt")
	seed(t, tg, 3, id)
	cmd := exec.CommandContext(t.Context(), shipped, "rekey", "--restart", "--identity", id)
	cmd.Env, cmd.Dir = tg.environ(pauseEnv+"=1"), tg.dir
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("re-sealed 3 of 3 objects")) || bytes.Contains(out, []byte("paused")) {
		t.Errorf("the shipped rekey with %s=1: %v\n%s", pauseEnv, err, out)
	}
}
