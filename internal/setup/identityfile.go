package setup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"syscall"

	"filippo.io/age"

	"github.com/cairnhq/state/internal/envelope"
)

// ErrNotRegularFile means an identity path names something other than a
// regular file: a directory, a FIFO, a socket, a device. Such a path is
// never read: a FIFO would block the read until something writes to it.
var ErrNotRegularFile = errors.New("not a regular file")

// IdentityFile is an identity file as [ReadIdentityFile] read it.
type IdentityFile struct {
	// Path is the path it was read from.
	Path string
	// Identities are its identities.
	Identities []age.Identity
	// Mode is the file's permission bits (zero on Windows).
	Mode fs.FileMode
}

// OpenToOthers reports whether the file may be read or written by its
// group or by others. An age identity is a secret key; the file should be
// 0600 or 0400. It is always false on Windows, which has no such modes.
func (f IdentityFile) OpenToOthers() bool { return f.Mode&0o077 != 0 }

// ReadIdentityFile reads the identity file at path — age-keygen's output
// or an SSH private key (envelope.ParseIdentities) — opening it once,
// following symbolic links (as a Kubernetes Secret volume has them), and
// judging the file it opened, not the path a second time: it must be a
// regular file ([ErrNotRegularFile] otherwise, before anything is read),
// and its mode is the opened file's. It is opened non-blocking, so that a
// FIFO cannot hang the open, and read without a timeout: a regular file
// does not block. Errors name the path and never quote the file's
// content; a missing file matches fs.ErrNotExist.
func ReadIdentityFile(path string) (IdentityFile, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return IdentityFile{}, fmt.Errorf("identity file %s: %w", path, unwrapPathError(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return IdentityFile{}, fmt.Errorf("identity file %s: %w", path, unwrapPathError(err))
	}
	if !fi.Mode().IsRegular() {
		return IdentityFile{}, fmt.Errorf("identity file %s: %w (%s)", path, ErrNotRegularFile, fileType(fi.Mode()))
	}
	out := IdentityFile{Path: path}
	if runtime.GOOS != "windows" {
		out.Mode = fi.Mode().Perm()
	}
	if out.Identities, err = envelope.ParseIdentities(f); err != nil {
		return IdentityFile{}, fmt.Errorf("identity file %s: %w", path, err)
	}
	return out, nil
}

// unwrapPathError drops the *fs.PathError around err, whose text repeats
// the path the caller names already.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// fileType names a file that is not a regular one.
func fileType(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "type " + m.Type().String()
}
