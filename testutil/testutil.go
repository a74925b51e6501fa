// Package testutil starts real storage servers for tests: the shared parts
// of [github.com/cairnhq/state/testutil/garage] and
// [github.com/cairnhq/state/testutil/versitygw] (finding a binary, running
// a process that cannot outlive the test, skipping or failing when a server
// is missing) and [S3Server], what a started server offers a test.
//
// # Missing servers
//
// A test that needs a server whose binary cannot be found is skipped with a
// message saying how to install it, unless the environment variable
// CAIRN_REQUIRE_SERVERS=1 is set (make test and CI set it): then it fails,
// so that a green CI run cannot hide a skipped server.
package testutil

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
)

// RequireServersEnv is the environment variable that turns a missing
// server from a skip into a failure when set to "1".
const RequireServersEnv = "CAIRN_REQUIRE_SERVERS"

// RequireServer is called when the server called name is not available:
// it skips the test with howto (how to get the server), or fails it when
// CAIRN_REQUIRE_SERVERS=1. It does not return.
func RequireServer(t testing.TB, name, howto string) {
	t.Helper()
	msg := fmt.Sprintf("%s is not available: %s", name, howto)
	if os.Getenv(RequireServersEnv) == "1" {
		t.Fatalf("%s (%s=1, so this fails instead of skipping)", msg, RequireServersEnv)
	}
	t.Skip(msg)
}

// FindBinary locates an executable: the path in the environment variable
// envVar when it is set (an error if it is not executable, rather than a
// silent fallback), else name on PATH, else cachePath. It returns "" and
// no error when none is found.
func FindBinary(envVar, name, cachePath string) (string, error) {
	if p := os.Getenv(envVar); p != "" {
		if err := executable(p); err != nil {
			return "", fmt.Errorf("%s=%q: %w", envVar, p, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	if cachePath != "" && executable(cachePath) == nil {
		return cachePath, nil
	}
	return "", nil
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return errors.New("not an executable file")
	}
	return nil
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago. A
// server started on it may still lose a race with another process; the
// helpers retry the start when that happens.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// CachePath returns $HOME/.cache/cairn-state/<rel>, where make test caches
// the server binaries, or "" when there is no home directory.
func CachePath(rel string) string {
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return ""
	}
	return home + "/.cache/cairn-state/" + rel
}
