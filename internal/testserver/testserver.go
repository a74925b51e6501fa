// Package testserver runs the server processes of cairn-state's tests
// (testutil/garage, testutil/versitygw, the docs' transcripts): finding a
// binary, a process that cannot outlive the test, a port that was free,
// and a start tried again when another process took that port first.
package testserver

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
)

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

// Retry calls start with attempt 1, 2, 3 until it returns no error, and
// returns the last error. It gives up early unless the failed attempt lost
// a race for its port (the process start returned, which it stops, says
// so anywhere in its log: [Process.LostPortRace]); a nil process means
// nothing to try again.
func Retry(start func(attempt int) (*Process, error)) error {
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		var p *Process
		if p, err = start(attempt); err == nil {
			return nil
		}
		if p == nil {
			return err
		}
		p.Stop()
		if !p.LostPortRace() {
			return err
		}
	}
	return err
}
