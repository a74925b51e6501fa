//go:build unix

package fs_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cairnhq/state/backend/fs"
)

// nobody is the unprivileged user the read-only test runs as when the test
// runs as root (root may write anywhere, whatever the mode bits say).
const nobody = 65534

// A directory this process may read but not write: every write fails with
// an error matching backend.ErrPermission (so callers stop retrying), with
// the operating system's own message, and reads still work.
func TestWrites_ReadOnlyDirectory_FailWithErrPermission(t *testing.T) {
	base, err := os.MkdirTemp("", "cairn-fs-readonly-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = filepath.WalkDir(base, func(p string, _ os.DirEntry, _ error) error { return os.Chmod(p, 0o700) })
		os.RemoveAll(base)
	})
	dir := filepath.Join(base, "store")
	b, err := fs.New(dir, fs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	put(t, b, "kept", []byte("kept"))
	b.(io.Closer).Close()
	// The lock file exists once a write has been made; a fresh directory
	// without it is the harder case for Delete, so remove it.
	if err := os.Remove(filepath.Join(dir, `.lock\`)); err != nil {
		t.Fatal(err)
	}

	cmd := helper(t, "read-only", "FS_DIR="+dir)
	if os.Geteuid() == 0 {
		if err := filepath.WalkDir(base, func(p string, _ os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Chown(p, nobody, nobody)
		}); err != nil {
			t.Fatal(err)
		}
		// The test binary must be reachable by nobody too: a copy in a
		// folder of its own (go test's build folder is root's, 0700).
		exe := filepath.Join(base, "fs.test")
		data, err := os.ReadFile(cmd.Path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(exe, data, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd.Path, cmd.Args[0] = exe, exe
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	}
	for _, p := range []string{base, dir, filepath.Join(dir, "kept")} {
		if err := os.Chmod(p, 0o500); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("helper: %v\n%s", err, out.String())
	}
	got := map[string]string{}
	for line := range strings.Lines(out.String()) {
		op, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		got[op] = rest
	}
	if r := got["get"]; r != "false <nil>" {
		t.Errorf("Get in a read-only directory: %q, want success", r)
	}
	for _, op := range []string{"put", "put-if-absent", "delete", "new"} {
		r, ok := got[op]
		if !ok {
			t.Errorf("%s: no report in %q", op, out.String())
			continue
		}
		if !strings.HasPrefix(r, "true ") {
			t.Errorf("%s in a read-only directory: %q, want an error matching ErrPermission", op, r)
		}
		if !strings.Contains(r, "permission denied") {
			t.Errorf("%s: error %q lacks the system's message", op, r)
		}
		if strings.Count(r, "permission denied") > 1 {
			t.Errorf("%s: error %q repeats itself", op, r)
		}
	}
	// Nothing changed.
	b, err = fs.New(dir, fs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.(io.Closer).Close()
	if got := get(t, b, "kept"); string(got) != "kept" {
		t.Errorf("kept = %q after refused writes", got)
	}
}
