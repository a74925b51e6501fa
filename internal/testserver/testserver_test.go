package testserver_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnhq/state/internal/testserver"
)

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
	if got, err := testserver.FindBinary("TOOL_BIN", "tool", ""); err != nil || got != exe {
		t.Errorf("with TOOL_BIN set: %q, %v; want %q", got, err, exe)
	}
	t.Setenv("TOOL_BIN", plain)
	if _, err := testserver.FindBinary("TOOL_BIN", "tool", exe); err == nil || !strings.Contains(err.Error(), "TOOL_BIN") {
		t.Errorf("TOOL_BIN naming a non-executable: err = %v, want an error naming TOOL_BIN (no silent fallback)", err)
	}
	t.Setenv("TOOL_BIN", "")
	if got, err := testserver.FindBinary("TOOL_BIN", "tool", exe); err != nil || got != exe {
		t.Errorf("falling back to the cache path: %q, %v; want %q", got, err, exe)
	}
	if got, err := testserver.FindBinary("TOOL_BIN", "tool", filepath.Join(dir, "absent")); err != nil || got != "" {
		t.Errorf("nothing anywhere: %q, %v; want \"\" and no error", got, err)
	}
	t.Setenv("PATH", dir)
	if got, err := testserver.FindBinary("TOOL_BIN", "tool", ""); err != nil || got != exe {
		t.Errorf("on PATH: %q, %v; want %q", got, err, exe)
	}
}

func TestPortInUse(t *testing.T) {
	if !testserver.PortInUse("Error: listen tcp 127.0.0.1:7070: bind: address already in use") {
		t.Error("Go's bind error not recognised")
	}
	if !testserver.PortInUse("Error: Os { code: 98, kind: AddrInUse, message: \"Address in use\" }") {
		t.Error("Rust's AddrInUse not recognised")
	}
	if testserver.PortInUse("permission denied") {
		t.Error("an unrelated error taken for a port race")
	}
}
