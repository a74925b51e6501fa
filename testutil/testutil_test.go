package testutil_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnhq/state/testutil"
)

// TestRequireServerHelper is run as a child process by the tests below.
func TestRequireServerHelper(t *testing.T) {
	if os.Getenv("CAIRN_TESTUTIL_CHILD") != "1" {
		t.Skip("run as a child process by TestRequireServer_*")
	}
	testutil.RequireServer(t, "frobd", "install frobd with `frob install`")
	t.Error("RequireServer returned")
}

func runChild(t *testing.T, require string) (string, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestRequireServerHelper$", "-test.v")
	cmd.Env = append(os.Environ(), "CAIRN_TESTUTIL_CHILD=1", testutil.RequireServersEnv+"="+require)
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
		t.Fatalf("child passed with %s=1:\n%s", testutil.RequireServersEnv, out)
	}
	if !strings.Contains(out, "--- FAIL") || !strings.Contains(out, "frob install") || strings.Contains(out, "RequireServer returned") {
		t.Errorf("child did not fail with the how-to, or went on:\n%s", out)
	}
}

func TestFindBinary_Order(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "tool")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", t.TempDir())

	t.Setenv("TOOL_BIN", exe)
	if got, err := testutil.FindBinary("TOOL_BIN", "tool", ""); err != nil || got != exe {
		t.Errorf("with TOOL_BIN set: %q, %v; want %q", got, err, exe)
	}
	t.Setenv("TOOL_BIN", plain)
	if _, err := testutil.FindBinary("TOOL_BIN", "tool", exe); err == nil || !strings.Contains(err.Error(), "TOOL_BIN") {
		t.Errorf("TOOL_BIN naming a non-executable: err = %v, want an error naming TOOL_BIN (no silent fallback)", err)
	}
	t.Setenv("TOOL_BIN", "")
	if got, err := testutil.FindBinary("TOOL_BIN", "tool", exe); err != nil || got != exe {
		t.Errorf("falling back to the cache path: %q, %v; want %q", got, err, exe)
	}
	if got, err := testutil.FindBinary("TOOL_BIN", "tool", filepath.Join(dir, "absent")); err != nil || got != "" {
		t.Errorf("nothing anywhere: %q, %v; want \"\" and no error", got, err)
	}
	t.Setenv("PATH", dir)
	if got, err := testutil.FindBinary("TOOL_BIN", "tool", ""); err != nil || got != exe {
		t.Errorf("on PATH: %q, %v; want %q", got, err, exe)
	}
}

func TestPortInUse(t *testing.T) {
	if !testutil.PortInUse("Error: listen tcp 127.0.0.1:7070: bind: address already in use") {
		t.Error("Go's bind error not recognised")
	}
	if !testutil.PortInUse("Error: Os { code: 98, kind: AddrInUse, message: \"Address in use\" }") {
		t.Error("Rust's AddrInUse not recognised")
	}
	if testutil.PortInUse("permission denied") {
		t.Error("an unrelated error taken for a port race")
	}
}
