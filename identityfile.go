package state

import (
	"io/fs"
	"os"
	"runtime"
)

// IdentityFileOpenToOthers reports whether the identity file at path
// (followed through symbolic links, as a Kubernetes Secret volume has them)
// may be read or written by its group or by others, with its permission
// bits. An age identity is a secret key; the file should be 0600 or 0400.
// It reports false when the file cannot be examined (the read that follows
// says why) and on Windows, which has no such modes.
func IdentityFileOpenToOthers(path string) (fs.FileMode, bool) {
	if runtime.GOOS == "windows" {
		return 0, false
	}
	fi, err := os.Stat(path)
	if err != nil {
		return 0, false
	}
	perm := fi.Mode().Perm()
	return perm, perm&0o077 != 0
}
