// Package fs is a [backend.Backend] on a local directory: the embedded
// default of cairn-state.
//
// # Guarantees
//
//   - Writes are atomic and durable: the object is written to a temp file
//     next to its final place, fsynced, closed, renamed over the target, and
//     the directory is fsynced. A reader sees the whole old object or the
//     whole new one; a process killed in the middle of a Put leaves the old
//     object (or none) in place.
//   - Conditional writes (if absent, if version) and conditional deletes are
//     atomic across goroutines and processes: every mutation checks its
//     condition and renames (or removes) while holding an exclusive flock(2)
//     on a lock file in the root. A directory shared between machines over a
//     network file system gets this only where that file system honours
//     flock.
//   - Every write gets a fresh random version, even for identical bytes.
//   - Files are created 0600 and directories 0700. Keys cannot leave the
//     root: they are validated by [backend.ValidateKey], and every file
//     operation goes through an [os.Root], which also refuses symbolic links
//     that point outside the root.
//
// # On-disk layout
//
// Key "a/b/c" is stored as the file "a\/b\/c" below the root: each
// directory's name is the key segment followed by a backslash, and the
// object's file has the last segment as its name. A backslash cannot appear
// in a key, so a key can be both an object and a prefix of other keys ("a"
// and "a/b"), exactly as on S3, and the backend's own files never collide
// with objects: temp files are named ".tmp\<random>" and the lock file is
// ".lock\" in the root. List hides them. A path segment longer than the
// file system's name limit (255 bytes on most) is refused with
// [backend.ErrUnsupported].
//
// Each object file starts with a 44-byte header line, "cairn-fs 1 " and the
// version as 32 hexadecimal digits, followed by the object's bytes; Get
// strips it. Files dropped into the directory by hand are therefore not
// objects (Get reports them as corrupt). See docs/adr/0002 for why.
//
// A directory this process may not write (EACCES, EPERM) or a read-only
// file system (EROFS) makes writes fail with an error that matches
// [backend.ErrPermission] and keeps the operating system's own message.
//
// Temp files of a process killed mid-write stay on disk, hidden from List;
// [Options.RemoveTempFilesOlderThan] lets New sweep them.
package fs

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cairnhq/state/backend"
)

const (
	dirSuffix  = `\`
	tempPrefix = `.tmp\`
	lockName   = `.lock\`
	magic      = "cairn-fs 1 "
	headerLen  = len(magic) + 32 + 1
	// maxMkdirTries bounds the retries when a concurrent Delete prunes the
	// directory a Put is about to write into.
	maxMkdirTries = 10
)

// Options configure a backend made by [New]. The zero value is usable.
type Options struct {
	// Logger receives warnings (a temp file that could not be removed, a
	// stray file in the tree). Nil discards them. Nothing secret is logged:
	// keys and paths only, never object bytes.
	Logger *slog.Logger

	// RemoveTempFilesOlderThan, when positive, makes New remove temp files
	// left behind by processes killed in the middle of a write, if they are
	// older than this. Choose it well above the time of the longest write,
	// so that a live writer's temp file is never taken. Zero leaves them.
	RemoveTempFilesOlderThan time.Duration
}

// fsBackend stores objects in a local directory.
type fsBackend struct {
	root *os.Root
	dir  string
	log  *slog.Logger
	// sem serialises this process's mutations before they compete for the
	// flock with other processes, so that goroutines wait on a channel
	// (which honours ctx) rather than polling the lock.
	sem chan struct{}
}

var _ backend.Backend = (*fsBackend)(nil)

// New opens (creating it with mode 0700 if needed) the directory dir as a
// backend. On systems without flock(2) it fails with backend.ErrUnsupported.
//
// The backend is safe for concurrent use by multiple goroutines and by
// multiple processes sharing the directory. It copies objects inside the
// directory (backend.Copier) and holds a handle on the directory: it is an
// io.Closer, and operations after Close fail.
func New(dir string, opts Options) (backend.Backend, error) {
	if dir == "" {
		return nil, errors.New("fs: empty directory name")
	}
	if err := platformSupported(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("fs: create root %s: %w", dir, classify(err))
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("fs: open root %s: %w", dir, classify(err))
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &fsBackend{root: root, dir: dir, log: log, sem: make(chan struct{}, 1)}
	if opts.RemoveTempFilesOlderThan > 0 {
		if err := b.removeStaleTemps(opts.RemoveTempFilesOlderThan); err != nil {
			root.Close()
			return nil, err
		}
	}
	return b, nil
}

// Close releases the directory handle. Operations after Close fail.
func (b *fsBackend) Close() error { return b.root.Close() }

// Capabilities implements backend.Backend: conditional writes are atomic.
func (b *fsBackend) Capabilities() backend.Capabilities {
	return backend.Capabilities{ConditionalWrites: true, CopySourceConditions: true}
}

// Now implements backend.Backend. The storage is the local disk, so its
// clock is the local clock; so is the Now of every Object returned, read
// when the operation has done its work on the disk.
func (b *fsBackend) Now(ctx context.Context) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	return time.Now(), nil
}

// diskPath maps a valid key to its file below the root.
func diskPath(key string) string {
	segs := strings.Split(key, "/")
	for i := range len(segs) - 1 {
		segs[i] += dirSuffix
	}
	return strings.Join(segs, "/")
}

// keyOf maps a path below the root back to its key.
func keyOf(p string) string {
	segs := strings.Split(p, "/")
	for i := range len(segs) - 1 {
		segs[i] = strings.TrimSuffix(segs[i], dirSuffix)
	}
	return strings.Join(segs, "/")
}

func check(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return backend.ValidateKey(key)
}

// mapErr turns file-system errors about key into backend errors.
func mapErr(op, key string, err error) error {
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		return fmt.Errorf("%s %q: %w", op, key, backend.ErrNotFound)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return fmt.Errorf("%s %q: a path segment is longer than the file system allows: %w (%w)", op, key, backend.ErrUnsupported, err)
	}
	return fmt.Errorf("fs: %s %q: %w", op, key, classify(err))
}

// classify marks the file system refusing this process — EACCES, EPERM,
// EROFS — as backend.ErrPermission, keeping err's own text; other errors
// are returned as they are.
func classify(err error) error {
	if errors.Is(err, iofs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		return permissionError{err}
	}
	return err
}

// permissionError is err, also matching backend.ErrPermission.
type permissionError struct{ err error }

func (e permissionError) Error() string   { return e.err.Error() }
func (e permissionError) Unwrap() []error { return []error{backend.ErrPermission, e.err} }

// Get implements backend.Backend.
func (b *fsBackend) Get(ctx context.Context, key string) (io.ReadCloser, backend.Object, error) {
	if err := check(ctx, key); err != nil {
		return nil, backend.Object{}, err
	}
	f, obj, err := b.open(key)
	if err != nil {
		return nil, backend.Object{}, err
	}
	obj.Now = time.Now()
	return f, obj, nil
}

// open opens key's file positioned after its header.
func (b *fsBackend) open(key string) (*os.File, backend.Object, error) {
	f, err := b.root.Open(diskPath(key))
	if err != nil {
		return nil, backend.Object{}, mapErr("get", key, err)
	}
	obj, err := readHeader(f, key)
	if err != nil {
		f.Close()
		return nil, backend.Object{}, err
	}
	return f, obj, nil
}

func readHeader(f *os.File, key string) (backend.Object, error) {
	fi, err := f.Stat()
	if err != nil {
		return backend.Object{}, mapErr("get", key, err)
	}
	if !fi.Mode().IsRegular() {
		return backend.Object{}, fmt.Errorf("get %q: not a regular file: %w", key, backend.ErrNotFound)
	}
	var h [headerLen]byte
	if _, err := io.ReadFull(f, h[:]); err != nil {
		return backend.Object{}, fmt.Errorf("fs: get %q: object file %s is corrupt: short header (%v): %w", key, f.Name(), err, backend.ErrCorrupt)
	}
	version, ok := parseHeader(h[:])
	if !ok {
		return backend.Object{}, fmt.Errorf("fs: get %q: object file %s is corrupt: no cairn-fs header: %w", key, f.Name(), backend.ErrCorrupt)
	}
	return backend.Object{
		Key:     key,
		Size:    fi.Size() - int64(headerLen),
		Version: version,
		ModTime: fi.ModTime(),
	}, nil
}

func parseHeader(h []byte) (string, bool) {
	if len(h) != headerLen || string(h[:len(magic)]) != magic || h[headerLen-1] != '\n' {
		return "", false
	}
	v := string(h[len(magic) : headerLen-1])
	if _, err := hex.DecodeString(v); err != nil {
		return "", false
	}
	return v, true
}

// currentVersion returns the version of key, or "" when it is absent. A
// corrupt object file has the version List reports for it, so that a
// caller that judged it can replace or delete it conditionally.
func (b *fsBackend) currentVersion(key string) (string, error) {
	f, obj, err := b.open(key)
	switch {
	case errors.Is(err, backend.ErrNotFound):
		return "", nil
	case errors.Is(err, backend.ErrCorrupt):
		c, serr := b.corruptObject(key)
		if serr != nil {
			return "", err
		}
		return c.Version, nil
	case err != nil:
		return "", err
	}
	f.Close()
	return obj.Version, nil
}

// corruptObject describes a corrupt object file from the file itself: its
// size and time, and a version no write produces (derived from its time).
func (b *fsBackend) corruptObject(key string) (backend.Object, error) {
	fi, err := b.root.Stat(diskPath(key))
	if err != nil {
		return backend.Object{}, err
	}
	return backend.Object{Key: key, Size: fi.Size(), Version: "corrupt-" + strconv.FormatInt(fi.ModTime().UnixNano(), 36), ModTime: fi.ModTime()}, nil
}

func newVersion() string {
	var v [16]byte
	_, _ = rand.Read(v[:]) // never fails (crypto/rand.Read's contract)
	return hex.EncodeToString(v[:])
}

// Put implements backend.Backend.
func (b *fsBackend) Put(ctx context.Context, key string, data []byte, opts backend.PutOptions) (backend.Object, error) {
	return b.PutBody(ctx, key, bytes.NewReader(data), int64(len(data)), opts)
}

// putCondition is the check of a put's conditions, made under the lock
// right before the rename.
func (b *fsBackend) putCondition(key string, opts backend.PutOptions) func() error {
	return func() error {
		if !opts.IfAbsent && opts.IfVersion == "" {
			return nil
		}
		cur, err := b.currentVersion(key)
		if err != nil {
			return err
		}
		switch {
		case opts.IfAbsent && cur != "":
			return fmt.Errorf("put %q if absent: exists with version %s: %w", key, cur, backend.ErrPreconditionFailed)
		case opts.IfVersion != "" && cur == "":
			return fmt.Errorf("put %q if version %s: absent: %w", key, opts.IfVersion, backend.ErrPreconditionFailed)
		case opts.IfVersion != "" && cur != opts.IfVersion:
			return fmt.Errorf("put %q if version %s: version is %s: %w", key, opts.IfVersion, cur, backend.ErrPreconditionFailed)
		}
		return nil
	}
}

// write is every write's path (Put, Copy): fill writes the object's bytes
// into a temp file next to key's, which is fsynced; then, holding the
// lock, cond checks the write's conditions and the temp file is renamed
// over key's; then the directory is fsynced. op names the operation in
// errors.
func (b *fsBackend) write(ctx context.Context, op, key string, fill func(io.Writer) (int64, error), cond func() error) (backend.Object, error) {
	target := diskPath(key)
	dir := path.Dir(target)
	version := newVersion()

	f, tmp, created, err := b.createTemp(dir)
	if err != nil {
		return backend.Object{}, mapErr(op, key, err)
	}
	committed := false
	defer func() {
		if !committed {
			if err := b.root.Remove(tmp); err != nil && !errors.Is(err, iofs.ErrNotExist) {
				b.log.Warn("fs: could not remove temp file", "dir", b.dir, "temp", tmp, "key", key, "err", err)
			}
		}
	}()
	size, modTime, err := writeTemp(f, version, fill)
	if err != nil {
		return backend.Object{}, fmt.Errorf("fs: %s %q: %w", op, key, classify(err))
	}

	unlock, err := b.lock(ctx)
	if err != nil {
		return backend.Object{}, fmt.Errorf("%s %q: %w", op, key, err)
	}
	err = func() error {
		defer unlock()
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := cond(); err != nil {
			return err
		}
		if err := b.root.Rename(tmp, target); err != nil {
			return mapErr(op, key, err)
		}
		committed = true
		return nil
	}()
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return backend.Object{}, fmt.Errorf("%s %q: %w", op, key, err)
		}
		return backend.Object{}, err
	}
	// The rename is visible; make it durable. A failure here is reported,
	// though the object is in place.
	if err := b.syncDirs(dir, created); err != nil {
		return backend.Object{}, fmt.Errorf("fs: %s %q: written but not synced: %w", op, key, classify(err))
	}
	return backend.Object{Key: key, Size: size, Version: version, ModTime: modTime, Now: time.Now()}, nil
}

// createTemp creates a fresh temp file in dir, creating dir if needed. It
// reports whether it had to create directories.
func (b *fsBackend) createTemp(dir string) (f *os.File, name string, created bool, err error) {
	for range maxMkdirTries {
		name = path.Join(dir, tempPrefix+newVersion())
		f, err := b.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			return f, name, created, nil
		}
		if !errors.Is(err, iofs.ErrNotExist) {
			return nil, "", created, err
		}
		// The directory is missing, or a concurrent Delete pruned it —
		// maybe a parent MkdirAll had just found or made: then again.
		if err := b.root.MkdirAll(dir, 0o700); err != nil && !errors.Is(err, iofs.ErrNotExist) {
			return nil, "", created, err
		}
		created = true
	}
	return nil, "", created, fmt.Errorf("directory %s keeps disappearing", dir)
}

// writeTemp fills the temp file with the header and what fill writes,
// fsyncs and closes it, and returns the object's size (without the
// header) and its modification time.
func writeTemp(f *os.File, version string, fill func(io.Writer) (int64, error)) (int64, time.Time, error) {
	defer f.Close()
	buf := make([]byte, 0, headerLen)
	buf = append(append(append(buf, magic...), version...), '\n')
	if _, err := f.Write(buf); err != nil {
		return 0, time.Time{}, err
	}
	size, err := fill(f)
	if err != nil {
		return 0, time.Time{}, err
	}
	if err := f.Sync(); err != nil {
		return 0, time.Time{}, err
	}
	fi, err := f.Stat()
	if err != nil {
		return 0, time.Time{}, err
	}
	return size, fi.ModTime(), f.Close()
}

// syncDirs fsyncs dir and, when directories were created for it, every
// ancestor up to the root, so that the new entries survive a crash.
func (b *fsBackend) syncDirs(dir string, created bool) error {
	for {
		d, err := b.root.Open(dir)
		if err != nil {
			return err
		}
		err = d.Sync()
		d.Close()
		if err != nil {
			return err
		}
		if !created || dir == "." {
			return nil
		}
		dir = path.Dir(dir)
	}
}

// Delete implements backend.Backend.
func (b *fsBackend) Delete(ctx context.Context, key string, opts backend.DeleteOptions) error {
	if err := check(ctx, key); err != nil {
		return err
	}
	target := diskPath(key)
	unlock, err := b.lock(ctx)
	if err != nil {
		return fmt.Errorf("delete %q: %w", key, err)
	}
	gone := false
	err = func() error {
		defer unlock()
		cur, err := b.currentVersion(key)
		if err != nil {
			return err
		}
		switch {
		case opts.IfVersion != "" && cur == "" && opts.AbsentOK:
			gone = true
			return nil
		case opts.IfVersion != "" && cur == "":
			return fmt.Errorf("delete %q if version %s: absent: %w", key, opts.IfVersion, backend.ErrPreconditionFailed)
		case opts.IfVersion != "" && cur != opts.IfVersion:
			return fmt.Errorf("delete %q if version %s: version is %s: %w", key, opts.IfVersion, cur, backend.ErrPreconditionFailed)
		case cur == "":
			return fmt.Errorf("delete %q: %w", key, backend.ErrNotFound)
		}
		if err := b.root.Remove(target); err != nil {
			return mapErr("delete", key, err)
		}
		return nil
	}()
	if err != nil || gone {
		return err
	}
	dir := path.Dir(target)
	if err := b.syncDirs(dir, false); err != nil {
		return fmt.Errorf("fs: delete %q: removed but not synced: %w", key, classify(err))
	}
	b.prune(dir)
	return nil
}

// prune removes dir and its ancestors while they are empty. A concurrent
// Put keeps its temp file in the directory until the rename, so rmdir(2)
// can never take a directory that is about to receive an object; a Put
// that finds its directory gone recreates it.
func (b *fsBackend) prune(dir string) {
	for dir != "." {
		if err := b.root.Remove(dir); err != nil {
			return // not empty, or gone: either way, stop
		}
		dir = path.Dir(dir)
	}
}

// List implements backend.Backend. It walks the directories that can hold
// keys with the prefix, sorts the keys, and then reads each object's header
// as it calls fn; objects deleted meanwhile are skipped.
func (b *fsBackend) List(ctx context.Context, prefix string, fn func(backend.Object) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := backend.ValidatePrefix(prefix); err != nil {
		return err
	}
	start := "."
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		start = diskPath(prefix[:i+1] + "x")
		start = path.Dir(start)
	}
	var keys []string
	err := iofs.WalkDir(b.root.FS(), start, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, iofs.ErrNotExist) {
				return nil // no such prefix, or pruned by a concurrent Delete
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		name := d.Name()
		switch {
		case p == start:
			return nil
		case d.IsDir():
			if !strings.HasSuffix(name, dirSuffix) || strings.Count(name, dirSuffix) != 1 {
				b.log.Warn("fs: skipping a directory that is not part of the layout", "dir", b.dir, "path", p)
				return iofs.SkipDir
			}
			return nil
		case strings.Contains(name, dirSuffix):
			return nil // temp or lock file
		case !d.Type().IsRegular():
			return nil
		}
		if k := keyOf(p); strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
		return nil
	})
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		return fmt.Errorf("fs: list %q: %w", prefix, classify(err))
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			return err
		}
		f, obj, err := b.open(k)
		if errors.Is(err, backend.ErrNotFound) {
			continue
		}
		if errors.Is(err, backend.ErrCorrupt) {
			// A damaged object file is still an object: listed (its size
			// and time from the file itself, a version no write produces),
			// so that its reader gets ErrCorrupt and judges it, rather than
			// every listing of its folder failing.
			c, serr := b.corruptObject(k)
			if serr != nil {
				continue
			}
			obj = c
			b.log.Warn("fs: object file is corrupt; listed so that its reader reports it", "key", k)
			err, f = nil, nil
		}
		if err != nil {
			return fmt.Errorf("list %q: %w", prefix, err)
		}
		if f != nil {
			f.Close()
		}
		obj.Now = time.Now()
		if err := fn(obj); err != nil {
			return err
		}
	}
	return nil
}

// removeStaleTemps removes temp files older than age anywhere in the tree.
func (b *fsBackend) removeStaleTemps(age time.Duration) error {
	cutoff := time.Now().Add(-age)
	return iofs.WalkDir(b.root.FS(), ".", func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("fs: sweeping temp files in %s: %w", b.dir, err)
		}
		if d.IsDir() || !strings.HasPrefix(d.Name(), tempPrefix) {
			return nil
		}
		fi, err := d.Info()
		if err != nil || fi.ModTime().After(cutoff) {
			return nil
		}
		if err := b.root.Remove(p); err != nil && !errors.Is(err, iofs.ErrNotExist) {
			b.log.Warn("fs: could not remove stale temp file", "dir", b.dir, "temp", p, "err", err)
		} else {
			b.log.Info("fs: removed stale temp file", "dir", b.dir, "temp", p, "age", time.Since(fi.ModTime()).Round(time.Second))
		}
		return nil
	})
}
