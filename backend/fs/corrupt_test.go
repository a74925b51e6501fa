package fs_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/fs"
)

// A damaged object file is reported, not fatal to its folder: Get says
// ErrCorrupt, List still lists it (and its neighbours), and a conditional
// write or delete on the version List reported replaces it — so the layer
// above can judge it and take it over.
func TestCorruptObjectFile_GetSaysCorrupt_ListShowsIt_CASReplacesIt(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b, err := fs.New(dir, fs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.(io.Closer).Close()
	put(t, b, "d/ok", []byte("fine"))
	path := filepath.Join(dir, `d\`, "bad")
	if err := os.WriteFile(path, []byte("not an object file"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Get(ctx, "d/bad"); !errors.Is(err, backend.ErrCorrupt) {
		t.Fatalf("Get of a corrupt file = %v, want ErrCorrupt", err)
	}
	var listed []backend.Object
	if err := b.List(ctx, "d/", func(o backend.Object) error {
		listed = append(listed, o)
		return nil
	}); err != nil {
		t.Fatalf("List over a corrupt file: %v", err)
	}
	if len(listed) != 2 || listed[0].Key != "d/bad" || listed[0].Version == "" || listed[1].Key != "d/ok" {
		t.Fatalf("listed %+v", listed)
	}
	if _, err := b.Put(ctx, "d/bad", []byte("x"), backend.PutOptions{IfVersion: "other"}); !errors.Is(err, backend.ErrPreconditionFailed) {
		t.Fatalf("Put with a wrong version over a corrupt file = %v, want ErrPreconditionFailed", err)
	}
	if _, err := b.Put(ctx, "d/bad", []byte("repaired"), backend.PutOptions{IfVersion: listed[0].Version}); err != nil {
		t.Fatalf("Put on the listed version of a corrupt file: %v", err)
	}
	if got := get(t, b, "d/bad"); string(got) != "repaired" {
		t.Fatalf("after the replace: %q", got)
	}
}
