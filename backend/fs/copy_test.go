//go:build unix

package fs_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/fs"
)

// A copy is an object file of its own — not a hard link, which would share
// the source's header and so its version — created 0600, with a version
// no other write has.
func TestCopy_IsAFileOfItsOwnWithANewVersion(t *testing.T) {
	b, dir := newBackend(t, fs.Options{})
	src := put(t, b, "a/src", []byte("the value"))
	obj, err := b.(backend.Copier).Copy(t.Context(), "a/src", "b/dst", backend.CopyOptions{IfSourceVersion: src.Version, IfAbsent: true})
	if err != nil {
		t.Fatal(err)
	}
	if obj.Version == src.Version {
		t.Fatalf("the copy has the source's version %q", obj.Version)
	}
	srcPath, dstPath := filepath.Join(dir, `a\`, "src"), filepath.Join(dir, `b\`, "dst")
	si, err := os.Stat(srcPath)
	if err != nil {
		t.Fatal(err)
	}
	di, err := os.Stat(dstPath)
	if err != nil {
		t.Fatal(err)
	}
	if os.SameFile(si, di) {
		t.Fatal("the copy is a hard link to the source")
	}
	if di.Mode().Perm() != 0o600 {
		t.Fatalf("the copy's mode is %v, want 0600", di.Mode().Perm())
	}
	raw, err := os.ReadFile(dstPath)
	if err != nil {
		t.Fatal(err)
	}
	if want := "cairn-fs 1 " + obj.Version + "\nthe value"; string(raw) != want {
		t.Fatalf("the copy's file holds %q, want %q", raw, want)
	}
	if got := listKeys(t, b); strings.Join(got, ",") != "a/src,b/dst" {
		t.Fatalf("listed %q (a temp file left behind?)", got)
	}
}

// A damaged source is reported as such and nothing is copied.
func TestCopy_CorruptSource_ErrCorruptAndNothingWritten(t *testing.T) {
	b, dir := newBackend(t, fs.Options{})
	put(t, b, "d/ok", []byte("fine"))
	if err := os.WriteFile(filepath.Join(dir, `d\`, "bad"), []byte("not an object file"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := b.(backend.Copier).Copy(t.Context(), "d/bad", "d/copy", backend.CopyOptions{}); !errors.Is(err, backend.ErrCorrupt) {
		t.Fatalf("Copy of a corrupt object file = %v, want ErrCorrupt", err)
	}
	if got := listKeys(t, b); strings.Join(got, ",") != "d/bad,d/ok" {
		t.Fatalf("listed %q", got)
	}
}
