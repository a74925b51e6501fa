package fs

import (
	"context"
	iofs "io/fs"
	"os"
	"path/filepath"
)

// Diagnosis is what [Backend.Diagnose] found of the backend's directory.
type Diagnosis struct {
	// Dir is the directory, as an absolute path.
	Dir string
	// Mode is the directory's permission bits.
	Mode iofs.FileMode
	// Err is why the directory could not be examined; Mode is then zero.
	Err error
}

// OpenToOthers reports whether group or others have any permission on the
// directory: they may then list the objects' names and sizes (the objects
// themselves are created 0600).
func (d Diagnosis) OpenToOthers() bool { return d.Mode&0o077 != 0 }

// Diagnose looks at the backend's directory as an operator's tool does:
// that it is there, and who may list it. It writes nothing.
func (b *Backend) Diagnose(ctx context.Context) Diagnosis {
	d := Diagnosis{Dir: b.dir}
	if abs, err := filepath.Abs(b.dir); err == nil {
		d.Dir = abs
	}
	if d.Err = ctx.Err(); d.Err != nil {
		return d
	}
	fi, err := os.Stat(d.Dir)
	if err != nil {
		d.Err = err
		return d
	}
	d.Mode = fi.Mode().Perm()
	return d
}
