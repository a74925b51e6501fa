package driver

import (
	"context"
	iofs "io/fs"
)

// Directory is implemented by the backend on a local directory (package
// fs), for an operator's tool: `cairn-state doctor`.
type Directory interface {
	// Diagnose looks at the backend's directory as an operator's tool
	// does: that it is there, and who may list it. It writes nothing.
	Diagnose(ctx context.Context) DirDiagnosis
}

// DirDiagnosis is what [Directory.Diagnose] found of the backend's
// directory.
type DirDiagnosis struct {
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
func (d DirDiagnosis) OpenToOthers() bool { return d.Mode&0o077 != 0 }
