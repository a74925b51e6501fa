package migrate_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/migratelog"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/migrate"
	"github.com/cairnhq/state/store"
)

// legacyFiles are a former on-disk state directory.
func legacyFiles(t *testing.T) map[string][]byte {
	t.Helper()
	big := make([]byte, 300<<10)
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{
		"config.json":                []byte(`{"name":"demo"}`),
		"keys/signing.key":           []byte("-----BEGIN PRIVATE KEY-----\nnot really\n"),
		"db/cache/large.bin":         big,
		"empty":                      {},
		"with space & unicode é.txt": []byte("ok"),
	}
}

func writeTree(t *testing.T, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestImportDir_EveryFileIsStoredVerifiedAndTheSourceKept(t *testing.T) {
	for _, cas := range []bool{true, false} {
		name := "conditional writes"
		if !cas {
			name = "no conditional writes"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := testkit.Store(t, mem.New(mem.Options{NoConditionalWrites: !cas}), store.Options{Logger: quietLogger()})
			files := legacyFiles(t)
			dir := writeTree(t, files)
			l := acquire(t, st, "pod-a")
			logs := &logBuffer{}

			m := migrate.ImportDir(dir, "legacy/")
			if m.ID != "import-legacy-dir:legacy" {
				t.Errorf("ID = %q", m.ID)
			}
			if _, err := migrate.Run(ctx, l, st, []migrate.Migration{m}, migrate.Options{Logger: logs.logger()}); err != nil {
				t.Fatal(err)
			}
			for name, want := range files {
				got, _, err := st.Get(ctx, "legacy/"+name)
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("state %q: %d bytes, %v; want the file's %d bytes", name, len(got), err, len(want))
				}
				src, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
				if err != nil || !bytes.Equal(src, want) {
					t.Errorf("source %q changed or vanished: %v", name, err)
				}
			}
			if !strings.Contains(logs.String(), "files=5 written=5 already_present=0") {
				t.Errorf("summary missing from log:\n%s", logs)
			}
		})
	}
}

func TestImportDir_RerunAfterPartialImport_WritesOnlyWhatIsMissing(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	l := acquire(t, st, "pod-a")
	files := legacyFiles(t)
	dir := writeTree(t, files)
	m := migrate.ImportDir(dir, "legacy/")

	// A first attempt got as far as one file before the process died.
	first, err := st.Put(ctx, "legacy/config.json", files["config.json"], store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	if _, err := migrate.Run(ctx, l, st, []migrate.Migration{m}, migrate.Options{Logger: logs.logger()}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "files=5 written=4 already_present=1") {
		t.Errorf("summary:\n%s", logs)
	}
	again, err := st.Stat(ctx, "legacy/config.json")
	if err != nil || again.Version != first.Version {
		t.Fatalf("an already imported object was rewritten: %v → %v (%v)", first.Version, again.Version, err)
	}

	// Running the step itself again changes nothing.
	before := versions(t, st)
	if err := m.Up(ctx, l.Fence(st)); err != nil {
		t.Fatal(err)
	}
	if after := versions(t, st); !maps.Equal(before, after) {
		t.Fatalf("a second import rewrote objects:\n%v\n%v", before, after)
	}
}

func TestImportDir_StateHoldsDifferentContent_RefusesToOverwrite(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	l := acquire(t, st, "pod-a")
	dir := writeTree(t, map[string][]byte{"token": []byte("from the file")})
	if _, err := st.Put(ctx, "legacy/token", []byte("newer, in state"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := migrate.Run(ctx, l, st, []migrate.Migration{migrate.ImportDir(dir, "legacy/")}, migrate.Options{Logger: quietLogger()})
	if !errors.Is(err, migrate.ErrImportConflict) || !strings.Contains(err.Error(), `"legacy/token"`) ||
		!strings.Contains(err.Error(), filepath.Join(dir, "token")) {
		t.Fatalf("err = %v, want ErrImportConflict naming the state and the file", err)
	}
	if get(t, st, "legacy/token") != "newer, in state" {
		t.Fatal("the state value was overwritten")
	}
}

func TestImportDir_MissingDirectory_FailsNamingIt_NotRecorded_ThenImportsOnceItIsThere(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	l := acquire(t, st, "pod-a")
	dir := filepath.Join(t.TempDir(), "mounted-late")
	m := migrate.ImportDir(dir, "")
	if m.ID != "import-legacy-dir" {
		t.Errorf("ID = %q", m.ID)
	}
	_, err := migrate.Run(ctx, l, st, []migrate.Migration{m}, migrate.Options{Logger: quietLogger()})
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "ImportDirIfPresent") {
		t.Fatalf("a missing legacy directory: %v, want an error naming it and the way out", err)
	}
	if states(t, st)[m.ID] == migratelog.StateApplied {
		t.Fatal("recorded as applied although nothing was imported")
	}
	// The volume is mounted: the next boot imports it.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("t0k"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.Run(ctx, l, st, []migrate.Migration{m}, migrate.Options{Logger: quietLogger()}); err != nil {
		t.Fatal(err)
	}
	if states(t, st)[m.ID] != migratelog.StateApplied || get(t, st, "token") != "t0k" {
		t.Fatal("the directory mounted late was not imported")
	}
}

func TestImportDirIfPresent_MissingDirectory_ImportsNothing_AppliedSayingSo(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	l := acquire(t, st, "pod-a")
	dir := filepath.Join(t.TempDir(), "never-existed")
	m := migrate.ImportDirIfPresent(dir, "")
	logs := &logBuffer{}
	if _, err := migrate.Run(ctx, l, st, []migrate.Migration{m}, migrate.Options{Logger: logs.logger()}); err != nil {
		t.Fatal(err)
	}
	if states(t, st)[m.ID] != migratelog.StateApplied {
		t.Fatal("not recorded as applied")
	}
	if n := len(versions(t, st)); n != 0 {
		t.Fatalf("%d objects written", n)
	}
	if !strings.Contains(logs.String(), "not be looked for again") || !strings.Contains(logs.String(), dir) {
		t.Errorf("no log line naming the directory:\n%s", logs)
	}
}

func TestImportDir_SymbolicLinks_FileFollowedDirectorySkippedWithWarning(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	l := acquire(t, st, "pod-a")
	outside := writeTree(t, map[string][]byte{"secret": []byte("linked")})
	dir := writeTree(t, map[string][]byte{"plain": []byte("p")})
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "dirlink")); err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	if _, err := migrate.Run(ctx, l, st, []migrate.Migration{migrate.ImportDir(dir, "")}, migrate.Options{Logger: logs.logger()}); err != nil {
		t.Fatal(err)
	}
	if get(t, st, "link") != "linked" || get(t, st, "plain") != "p" {
		t.Fatal("files not imported")
	}
	if !strings.Contains(logs.String(), "skipping a symbolic link") || !strings.Contains(logs.String(), "dirlink") {
		t.Fatalf("no warning for the directory link:\n%s", logs)
	}
}

func TestImportDir_UnreadableFile_FailsNamingIt(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads files whatever their mode")
	}
	st := newStore(t)
	l := acquire(t, st, "pod-a")
	dir := writeTree(t, map[string][]byte{"locked": []byte("x")})
	if err := os.Chmod(filepath.Join(dir, "locked"), 0); err != nil {
		t.Fatal(err)
	}
	_, err := migrate.Run(context.Background(), l, st, []migrate.Migration{migrate.ImportDir(dir, "")}, migrate.Options{Logger: quietLogger()})
	if !errors.Is(err, os.ErrPermission) || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("err = %v", err)
	}
}

// versions maps every application object of st to its version.
func versions(t *testing.T, st *store.Store) map[string]string {
	t.Helper()
	out := make(map[string]string)
	if err := st.List(context.Background(), "", func(i store.Info) error {
		out[i.Name] = i.Version
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}
