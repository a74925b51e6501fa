//go:build unix

package fs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/fs"
)

func put(t *testing.T, b backend.Backend, key string, data []byte) backend.Object {
	t.Helper()
	obj, err := b.Put(t.Context(), key, data, backend.PutOptions{})
	if err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
	return obj
}

func get(t *testing.T, b backend.Backend, key string) []byte {
	t.Helper()
	rc, _, err := b.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("Get(%q): read: %v", key, err)
	}
	return data
}

func listKeys(t *testing.T, b backend.Backend) []string {
	t.Helper()
	var keys []string
	if err := b.List(t.Context(), "", func(o backend.Object) error {
		keys = append(keys, o.Key)
		return nil
	}); err != nil {
		t.Fatalf("List: %v", err)
	}
	return keys
}

func TestPut_CreatesFiles0600AndDirectories0700(t *testing.T) {
	old := setUmask(0)
	t.Cleanup(func() { setUmask(old) })
	b, dir := newBackend(t, fs.Options{})
	put(t, b, "a/b/c", []byte("x"))
	for _, tc := range []struct {
		path string
		mode os.FileMode
	}{
		{`a\`, os.ModeDir | 0o700},
		{`a\/b\`, os.ModeDir | 0o700},
		{`a\/b\/c`, 0o600},
		{`.lock\`, 0o600},
	} {
		fi, err := os.Lstat(filepath.Join(dir, tc.path))
		if err != nil {
			t.Fatalf("stat %s: %v", tc.path, err)
		}
		if fi.Mode() != tc.mode {
			t.Errorf("%s has mode %v, want %v", tc.path, fi.Mode(), tc.mode)
		}
	}
}

func TestNew_CreatesRootDirectory0700(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "state")
	b, err := fs.New(dir, fs.Options{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { b.(io.Closer).Close() })
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("root created with mode %v, want no group or other access", fi.Mode())
	}
}

func TestLayout_ObjectFileHoldsHeaderAndBytes(t *testing.T) {
	b, dir := newBackend(t, fs.Options{})
	obj := put(t, b, ".cairn-state/lock", []byte("payload"))
	raw, err := os.ReadFile(filepath.Join(dir, `.cairn-state\`, "lock"))
	if err != nil {
		t.Fatalf("object file not where the layout says: %v", err)
	}
	want := "cairn-fs 1 " + obj.Version + "\npayload"
	if string(raw) != want {
		t.Errorf("object file = %q, want %q", raw, want)
	}
}

func TestLayout_KeyCanBeObjectAndPrefix(t *testing.T) {
	b, _ := newBackend(t, fs.Options{})
	put(t, b, "a", []byte("object a"))
	put(t, b, "a/b", []byte("object a/b"))
	if got := get(t, b, "a"); string(got) != "object a" {
		t.Errorf("Get(a) = %q", got)
	}
	if got := get(t, b, "a/b"); string(got) != "object a/b" {
		t.Errorf("Get(a/b) = %q", got)
	}
	if keys := listKeys(t, b); strings.Join(keys, ",") != "a,a/b" {
		t.Errorf("List = %q, want [a a/b]", keys)
	}
}

func TestList_HidesTempAndLockFiles(t *testing.T) {
	b, dir := newBackend(t, fs.Options{})
	put(t, b, "d/k", []byte("x"))
	stray := filepath.Join(dir, `d\`, `.tmp\0123456789abcdef`)
	if err := os.WriteFile(stray, []byte("half-written"), 0o600); err != nil {
		t.Fatal(err)
	}
	if keys := listKeys(t, b); strings.Join(keys, ",") != "d/k" {
		t.Errorf("List = %q, want only d/k", keys)
	}
}

func TestNew_RemovesStaleTempFilesOnlyWhenOld(t *testing.T) {
	dir := t.TempDir()
	b, err := fs.New(dir, fs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	put(t, b, "d/k", []byte("x"))
	b.(io.Closer).Close()
	old := filepath.Join(dir, `d\`, `.tmp\old`)
	fresh := filepath.Join(dir, `d\`, `.tmp\fresh`)
	for _, p := range []string{old, fresh} {
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	hourAgo := time.Now().Add(-time.Hour)
	if err := os.Chtimes(old, hourAgo, hourAgo); err != nil {
		t.Fatal(err)
	}
	b, err = fs.New(dir, fs.Options{RemoveTempFilesOlderThan: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.(io.Closer).Close() })
	if _, err := os.Stat(old); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale temp file still there (stat: %v)", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a fresh temp file (maybe a live writer's) was removed: %v", err)
	}
	if got := get(t, b, "d/k"); string(got) != "x" {
		t.Errorf("object changed by the sweep: %q", got)
	}
}

func TestDelete_PrunesEmptyDirectories(t *testing.T) {
	b, dir := newBackend(t, fs.Options{})
	put(t, b, "x/y/z", []byte("1"))
	put(t, b, "x/keep", []byte("2"))
	if err := b.Delete(t.Context(), "x/y/z", backend.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, `x\`, `y\`)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("empty directory y left behind (stat: %v)", err)
	}
	if _, err := os.Stat(filepath.Join(dir, `x\`)); err != nil {
		t.Errorf("non-empty directory x removed: %v", err)
	}
}

func TestKeys_SymlinkOutOfRootRefused(t *testing.T) {
	b, dir := newBackend(t, fs.Options{})
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("outside"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, `evil\`)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(t.Context(), "evil/planted", []byte("x"), backend.PutOptions{}); err == nil {
		t.Error("Put through a symlink pointing out of the root succeeded")
	}
	if _, err := os.Stat(filepath.Join(outside, "planted")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file was written outside the root (stat: %v)", err)
	}
	if rc, _, err := b.Get(t.Context(), "evil/secret"); err == nil {
		rc.Close()
		t.Error("Get through a symlink pointing out of the root succeeded")
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 {
		t.Errorf("outside directory has %d entries, want only the original file", len(entries))
	}
}

func TestKeys_HostileKeysWriteNothingOutsideRoot(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "root")
	b, err := fs.New(dir, fs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.(io.Closer).Close() })
	for _, key := range []string{"../x", "/tmp/x", "a/../../x", "..", `..\x`} {
		if _, err := b.Put(t.Context(), key, []byte("x"), backend.PutOptions{}); !errors.Is(err, backend.ErrInvalidKey) {
			t.Errorf("Put(%q) = %v, want ErrInvalidKey", key, err)
		}
	}
	entries, _ := os.ReadDir(parent)
	if len(entries) != 1 || entries[0].Name() != "root" {
		t.Errorf("parent of root holds %v, want only root", entries)
	}
}

func TestGet_CorruptFile_ReportsCorruptionNotAbsence(t *testing.T) {
	b, dir := newBackend(t, fs.Options{})
	if err := os.WriteFile(filepath.Join(dir, "dropped-by-hand"), []byte("no header"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := b.Get(t.Context(), "dropped-by-hand")
	if err == nil || errors.Is(err, backend.ErrNotFound) || !strings.Contains(err.Error(), "dropped-by-hand") || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("Get of a file without header = %v, want a corruption error naming the key", err)
	}
}

func TestPut_SegmentLongerThanNameLimit_Unsupported(t *testing.T) {
	b, dir := newBackend(t, fs.Options{})
	key := strings.Repeat("n", 300)
	if _, err := b.Put(t.Context(), key, []byte("x"), backend.PutOptions{}); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("Put of a 300-byte segment = %v, want ErrUnsupported", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != `.lock\` {
			t.Errorf("root holds %q after a refused put", e.Name())
		}
	}
}

func TestTwoBackendsOnOneDirectory_SeeEachOthersWrites(t *testing.T) {
	a, dir := newBackend(t, fs.Options{})
	b, err := fs.New(dir, fs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.(io.Closer).Close() })
	v := put(t, a, "shared", []byte("from a")).Version
	if _, err := b.Put(t.Context(), "shared", []byte("from b"), backend.PutOptions{IfAbsent: true}); !errors.Is(err, backend.ErrPreconditionFailed) {
		t.Errorf("second backend's if-absent put over the first's object = %v, want ErrPreconditionFailed", err)
	}
	if _, err := b.Put(t.Context(), "shared", []byte("from b"), backend.PutOptions{IfVersion: v}); err != nil {
		t.Errorf("second backend's put if version: %v", err)
	}
	if got := get(t, a, "shared"); !bytes.Equal(got, []byte("from b")) {
		t.Errorf("first backend reads %q, want the second's write", got)
	}
}

// A Put into a directory whose last object a concurrent Delete removes
// (which prunes the emptied directories up the tree, one of them maybe
// just recreated by the Put) lands: the Put recreates what was pruned.
// Before, a Put whose MkdirAll lost a parent to the prune failed with
// "not found" — what history's keep of a name's only version beside the
// prune of the one before it (retention 1) met.
func TestPut_BesideDeleteOfTheDirectorysLastObject_Lands(t *testing.T) {
	b, _ := newBackend(t, fs.Options{})
	ctx := t.Context()
	for i := range 3000 {
		old, next := fmt.Sprintf("a/b/c/%d", i), fmt.Sprintf("a/b/c/%d", i+1)
		if i == 0 {
			if _, err := b.Put(ctx, old, []byte("x"), backend.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		var putErr, delErr error
		wg.Go(func() { _, putErr = b.Put(ctx, next, []byte("x"), backend.PutOptions{}) })
		wg.Go(func() { delErr = b.Delete(ctx, old, backend.DeleteOptions{}) })
		wg.Wait()
		if putErr != nil || delErr != nil {
			t.Fatalf("round %d: put %v, delete %v", i, putErr, delErr)
		}
	}
}
