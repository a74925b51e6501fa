package fs_test

import (
	"errors"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/cairnhq/state/backend/fs"
	"github.com/cairnhq/state/internal/driver"
)

func TestDiagnose_TheDirectoryAndWhoMayListIt(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	b, err := fs.New(dir, fs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.(io.Closer).Close()

	d := b.(driver.Directory).Diagnose(t.Context())
	if d.Err != nil || d.Dir != dir || d.Mode != 0o700 || d.OpenToOthers() {
		t.Errorf("a fresh directory: %+v (open to others %v)", d, d.OpenToOthers())
	}
	for _, mode := range []os.FileMode{0o750, 0o705, 0o711} {
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		if d := b.(driver.Directory).Diagnose(t.Context()); d.Err != nil || d.Mode != mode || !d.OpenToOthers() {
			t.Errorf("mode %04o: %+v (open to others %v)", mode, d, d.OpenToOthers())
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if d := b.(driver.Directory).Diagnose(t.Context()); !errors.Is(d.Err, iofs.ErrNotExist) || d.Mode != 0 {
		t.Errorf("a removed directory: %+v", d)
	}
}

// A relative directory is shown as the absolute path it names.
func TestDiagnose_RelativeDirectory_ShownAbsolute(t *testing.T) {
	t.Chdir(t.TempDir())
	b, err := fs.New("state", fs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.(io.Closer).Close()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if d := b.(driver.Directory).Diagnose(t.Context()); d.Err != nil || d.Dir != filepath.Join(wd, "state") {
		t.Errorf("%+v, want %s", d, filepath.Join(wd, "state"))
	}
}
