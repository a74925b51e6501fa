//go:build unix

package setup_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/cairnhq/state/internal/setup"
	"github.com/cairnhq/state/internal/testkit"
)

func TestReadIdentityFile_OnlyARegularFile_OpenedOnceAndJudgedAsOpened(t *testing.T) {
	path, id := testkit.IdentityFile(t)
	// A symbolic link to it (a Kubernetes Secret volume) is followed; the
	// mode is the file's.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	f, err := setup.ReadIdentityFile(link)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Identities) != 1 || f.Identities[0].(*age.X25519Identity).String() != id.String() || f.Mode != 0o640 || !f.OpenToOthers() {
		t.Errorf("ReadIdentityFile(link) = %d identities, mode %04o, open to others %v", len(f.Identities), f.Mode, f.OpenToOthers())
	}

	// A FIFO is refused at once: nothing writes to it, and a blocking open
	// or read would wait forever.
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := setup.ReadIdentityFile(fifo)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, setup.ErrNotRegularFile) || !strings.Contains(err.Error(), fifo) || !strings.Contains(err.Error(), "FIFO") {
			t.Errorf("FIFO: %v, want ErrNotRegularFile naming the path and what it is", err)
		}
	case <-time.After(time.Minute):
		// Unblock the open so the goroutine ends, then fail.
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		<-done
		t.Fatal("ReadIdentityFile blocked on a FIFO")
	}

	// A directory is refused; a missing file matches fs.ErrNotExist.
	if _, err := setup.ReadIdentityFile(t.TempDir()); !errors.Is(err, setup.ErrNotRegularFile) {
		t.Errorf("directory: %v, want ErrNotRegularFile", err)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	if _, err := setup.ReadIdentityFile(missing); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing: %v, want fs.ErrNotExist naming the path", err)
	}
}
