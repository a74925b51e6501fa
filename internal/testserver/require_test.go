package testserver_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/cairnhq/state/internal/testserver"
)

// TestRequireServerHelper is run as a child process by the tests below.
func TestRequireServerHelper(t *testing.T) {
	if os.Getenv("CAIRN_TESTUTIL_CHILD") != "1" {
		t.Skip("run as a child process by TestRequireServer_*")
	}
	testserver.RequireServer(t, "frobd", "install frobd with `frob install`")
	t.Error("RequireServer returned")
}

func runChild(t *testing.T, require string) (string, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestRequireServerHelper$", "-test.v")
	cmd.Env = append(os.Environ(), "CAIRN_TESTUTIL_CHILD=1", testserver.RequireServersEnv+"="+require)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestRequireServer_NotRequired_SkipsWithHowTo(t *testing.T) {
	out, err := runChild(t, "")
	if err != nil {
		t.Fatalf("child failed: %v\n%s", err, out)
	}
	if !strings.Contains(out, "--- SKIP") || !strings.Contains(out, "frobd is not available: install frobd with `frob install`") {
		t.Errorf("child did not skip with the how-to:\n%s", out)
	}
}

func TestRequireServer_Required_FailsWithHowTo(t *testing.T) {
	out, err := runChild(t, "1")
	if err == nil {
		t.Fatalf("child passed with %s=1:\n%s", testserver.RequireServersEnv, out)
	}
	if !strings.Contains(out, "--- FAIL") || !strings.Contains(out, "frob install") || strings.Contains(out, "RequireServer returned") {
		t.Errorf("child did not fail with the how-to, or went on:\n%s", out)
	}
}
