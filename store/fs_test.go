package store_test

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cairnhq/state/backend"
	fsbackend "github.com/cairnhq/state/backend/fs"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/store"
)

// TestRawDirectory_FS_SecretNeverStored_FilesUnderReservedPrefix writes a
// known secret through a store on the fs backend, then reads every file in
// the directory with plain file reads: none contains the secret, and every
// object file sits below <root>/.cairn-state/.
func TestRawDirectory_FS_SecretNeverStored_FilesUnderReservedPrefix(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	b, err := fsbackend.New(dir, fsbackend.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.(io.Closer).Close() })
	const root = "apps/raw"
	s, secret, names := putSecret(t, b, root)
	if _, err := s.Update(ctx, "counter", func([]byte, bool) ([]byte, error) { return secret, nil }); err != nil {
		t.Fatal(err)
	}
	// The application's own file, through the guard, beside the state.
	if _, err := store.Guard(b, root).Put(ctx, root+"/app.txt", []byte("app"), backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}

	objects := 0
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if bytes.Contains(data, secret) || bytes.Contains(data, secret[:16]) {
			t.Errorf("file %q contains the secret", rel)
		}
		// The fs layout names directories "<segment>\"; undo it to get
		// the key.
		key := strings.ReplaceAll(filepath.ToSlash(rel), `\/`, "/")
		switch {
		case strings.HasPrefix(key, root+"/.cairn-state/"):
			objects++
		case key == root+"/app.txt" || key == `.lock\`: // the app's file; the fs backend's lock file
		default:
			t.Errorf("file %q (key %q) is outside %s/.cairn-state/", rel, key, root)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if objects != len(names)+2 {
		t.Errorf("found %d state files, want %d", objects, len(names)+2)
	}
}

func TestUpdate_FS_ConcurrentWriters_NoUpdateLost(t *testing.T) {
	b, err := fsbackend.New(t.TempDir(), fsbackend.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.(io.Closer).Close() })
	s := testkit.Store(t, b, store.Options{UpdateAttempts: 1000})
	const writers, each = 4, 5
	got := incrementConcurrently(t, s, writers, each)
	if string(got) != strconv.Itoa(writers*each) {
		t.Fatalf("counter = %q after %d concurrent increments on fs", got, writers*each)
	}
}
