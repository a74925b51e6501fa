package testserver_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// A server that lost the race for its port and panicked with a long
// backtrace (Garage under RUST_BACKTRACE=1: the AddrInUse line is 170
// lines from the end of its log) is started again, not given up on.
func TestRetry_PortRaceFarFromTheEndOfTheLog(t *testing.T) {
	dir := t.TempDir()
	script := "echo 'panicked at garage_net/netapp.rs:234:55:'; " +
		"echo 'called `Result::unwrap()` on an `Err` value: Os { code: 98, kind: AddrInUse, message: \"Address already in use\" }'; " +
		"i=0; while [ $i -lt 170 ]; do echo \"  $i: std::panicking::frame\"; i=$((i+1)); done; exit 134"
	attempts := 0
	err := testserver.Retry(func(attempt int) (*testserver.Process, error) {
		attempts = attempt
		p, err := testserver.StartProcess(t, "fake server", filepath.Join(dir, fmt.Sprintf("log-%d", attempt)), "/bin/sh", "-c", script)
		if err != nil {
			return nil, err
		}
		return p, p.WaitReady(30*time.Second, func() error { return errors.New("not ready") })
	})
	if err == nil || attempts != 3 {
		t.Fatalf("Retry: %d attempts, err %v; want 3 attempts (a lost port race is tried again) and the last error", attempts, err)
	}
	if !strings.Contains(err.Error(), "AddrInUse") {
		t.Errorf("the error does not show the panic's message, only the backtrace's end:\n%v", err)
	}
}
