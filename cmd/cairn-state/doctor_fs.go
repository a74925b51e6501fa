package main

import (
	"context"
	"fmt"

	"github.com/cairnhq/state/internal/driver"
	"github.com/cairnhq/state/lock"
)

// dirFacts are the directory check's.
type dirFacts struct {
	Directory string `json:"directory,omitempty"`
	Mode      string `json:"mode,omitempty"` // permission bits, octal
}

// checkDirectory checks a file: store: its directory (others should not
// see the state names), its conditional writes and its clock, which are
// the kernel's.
func (d *doctor) checkDirectory(ctx context.Context, diag driver.DirDiagnosis) {
	dir := diag.Dir
	switch {
	case diag.Err != nil:
		d.add(checkDirectory, statusFail, diag.Err.Error(), "check --url and the directory's permissions", &dirFacts{Directory: dir})
	case diag.OpenToOthers():
		d.add(checkDirectory, statusWarn, fmt.Sprintf("%s has mode %04o: others may list the state names and sizes (the objects themselves are 0600)", dir, diag.Mode),
			"chmod 700 "+dir, &dirFacts{Directory: dir, Mode: fmt.Sprintf("%04o", diag.Mode)})
	default:
		d.add(checkDirectory, statusOK, fmt.Sprintf("%s exists, mode %04o", dir, diag.Mode), "", &dirFacts{Directory: dir, Mode: fmt.Sprintf("%04o", diag.Mode)})
	}
	d.storage = true

	d.lockMode = lock.ModeClaims
	if d.b.Capabilities().ConditionalWrites {
		d.lockMode = lock.ModeCAS
	}
	d.add(checkConditional, statusOK, "the directory backend makes conditional writes atomic with flock(2) across processes (ADR 0002); nothing to probe", "", &lockModeFacts{LockMode: string(d.lockMode)})
	d.add(checkLockMode, statusOK, lockModeText(d.lockMode, "the directory backend enforces put and delete conditions"), "", &lockModeFacts{LockMode: string(d.lockMode)})

	now, err := d.b.Now(ctx)
	if err != nil {
		d.add(checkClock, statusWarn, "could not read the directory backend's clock: "+err.Error(), "", nil)
		return
	}
	d.add(checkClock, statusOK, "the directory backend's clock is this machine's", "", &clockFacts{StorageTime: now.UTC(), OffsetSeconds: seconds(0)})
}
