package migrate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/store"
)

var (
	// ErrImportConflict means a legacy file's state name already holds
	// different content. The import never overwrites it.
	ErrImportConflict = errors.New("state already holds different content")
	// ErrImportVerify means an imported object read back differs from its
	// source file.
	ErrImportVerify = errors.New("imported object does not read back as written")
)

// ImportDir returns a migration that imports a directory of legacy state
// files into the store: the file dir/a/b.json becomes the state name
// prefix+"a/b.json" (prefix is used as given, so end it with "/" for a
// folder). Every file is sealed and written, then read back, opened and
// compared byte for byte before it counts. The source is never modified or
// deleted: removing it is the operator's call, once the instance has booted
// from the store.
//
// It is idempotent: a file whose state name already holds the same bytes is
// counted as present and not rewritten. A state name that holds different
// bytes stops the import with ErrImportConflict rather than overwrite it.
//
// A missing dir fails the step, naming it, with an error matching
// fs.ErrNotExist: nothing is imported and the step is not recorded, so the
// boot stops and the next one, with the directory there (a volume mounted
// late, a path mistyped), imports it. An instance that may never have had
// the directory (a fresh install) uses [ImportDirIfPresent].
//
// Regular files are imported, and symbolic links to regular files are
// followed; anything else (sockets, links to directories) is skipped with a
// warning. Files are read whole, so the store's object size limit applies.
//
// The migration's ID is "import-legacy-dir" followed by ":"+prefix without
// slashes at its ends when prefix is not empty; the directory is not part
// of it, since it may differ between machines. Set the returned
// Migration's ID to choose another.
func ImportDir(dir, prefix string) Migration { return importDirMigration(dir, prefix, false) }

// ImportDirIfPresent is [ImportDir] for a directory that may never have
// existed on this instance (a fresh install): when dir is missing it
// imports nothing, logs so naming the path, and the step is recorded as
// applied — it is not looked for again, so a directory that appears later
// is never imported.
func ImportDirIfPresent(dir, prefix string) Migration { return importDirMigration(dir, prefix, true) }

func importDirMigration(dir, prefix string, ifPresent bool) Migration {
	id := "import-legacy-dir"
	if p := strings.Trim(prefix, "/"); p != "" {
		id += ":" + p
	}
	what := "import legacy files from %s under %q"
	if ifPresent {
		what = "import legacy files from %s (if present) under %q"
	}
	return Migration{
		ID:          id,
		Description: fmt.Sprintf(what, dir, prefix),
		Up: func(ctx context.Context, st *store.Store) error {
			_, err := importDir(ctx, st, dir, prefix, ifPresent)
			return err
		},
	}
}

// importStats are the counts of one import.
type importStats struct {
	Files, Written, Present, Skipped int
	Bytes                            int64
}

func importDir(ctx context.Context, st *store.Store, dir, prefix string, ifPresent bool) (importStats, error) {
	var stats importStats
	log := Logger(ctx)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, iofs.ErrNotExist) && ifPresent:
		log.Info("legacy import: the directory does not exist; nothing imported (the import is optional), and the step is recorded as applied: it will not be looked for again", "dir", dir)
		return stats, nil
	case errors.Is(err, iofs.ErrNotExist):
		return stats, fmt.Errorf("legacy import: the directory %s does not exist (%w): nothing was imported and the step is not recorded as applied; mount or restore it and start again, or, if this instance never had one, import with migrate.ImportDirIfPresent", dir, iofs.ErrNotExist)
	case err != nil:
		return stats, fmt.Errorf("legacy import: %w", err)
	case !fi.IsDir():
		return stats, fmt.Errorf("legacy import: %s is not a directory", dir)
	}
	log.Info("legacy import: starting", "dir", dir, "prefix", prefix)

	err = filepath.WalkDir(dir, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			if d.Type()&iofs.ModeSymlink == 0 {
				log.Warn("legacy import: skipping a file that is not a regular file", "path", p, "type", d.Type().String())
				stats.Skipped++
				return nil
			}
			ti, err := os.Stat(p)
			if err != nil || !ti.Mode().IsRegular() {
				log.Warn("legacy import: skipping a symbolic link that does not lead to a regular file", "path", p)
				stats.Skipped++
				return nil
			}
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		name := prefix + path.Clean(filepath.ToSlash(rel))
		n, written, err := importFile(ctx, st, p, name)
		if err != nil {
			return err
		}
		stats.Files++
		stats.Bytes += n
		if written {
			stats.Written++
			log.Debug("legacy import: imported", "path", p, "name", name, "bytes", n)
		} else {
			stats.Present++
			log.Debug("legacy import: already present", "path", p, "name", name)
		}
		return nil
	})
	if err != nil {
		return stats, err
	}
	log.Info("legacy import: complete; the source directory was left in place",
		"dir", dir, "files", stats.Files, "written", stats.Written, "already_present", stats.Present,
		"skipped", stats.Skipped, "bytes", stats.Bytes)
	return stats, nil
}

// importFile imports one file as name and verifies it. It reports the
// file's size and whether it wrote anything.
func importFile(ctx context.Context, st *store.Store, file, name string) (int64, bool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, false, fmt.Errorf("legacy import: %w", err)
	}
	n := int64(len(data))
	cur, _, err := st.Get(ctx, name)
	switch {
	case err == nil && bytes.Equal(cur, data):
		return n, false, nil
	case err == nil:
		return n, false, fmt.Errorf("legacy import of %s: %w: %q (%d bytes in state, %d in the file); "+
			"refusing to overwrite it: remove one of the two (`cairn-state rm %s` or delete the file) and start again",
			file, ErrImportConflict, name, len(cur), n, name)
	case !errors.Is(err, store.ErrNotFound):
		return n, false, fmt.Errorf("legacy import of %s: reading %q: %w", file, name, err)
	}
	// IfAbsent where the backend can enforce it, so that a value written
	// meanwhile by anyone is never clobbered.
	opts := store.PutOptions{IfAbsent: storeadmin.ConditionalWrites(st)}
	if _, err := st.Put(ctx, name, data, opts); err != nil {
		return n, false, fmt.Errorf("legacy import of %s: writing %q: %w", file, name, err)
	}
	back, _, err := st.Get(ctx, name)
	if err != nil {
		return n, false, fmt.Errorf("legacy import of %s: reading back %q: %w", file, name, err)
	}
	if !bytes.Equal(back, data) {
		return n, false, fmt.Errorf("legacy import of %s: %w: %q (%d bytes read back, %d written)",
			file, ErrImportVerify, name, len(back), n)
	}
	return n, true, nil
}
