package fs

import (
	"context"
	"os"
	"path/filepath"

	"github.com/cairnhq/state/internal/driver"
)

// Diagnose implements driver.Directory.
func (b *fsBackend) Diagnose(ctx context.Context) driver.DirDiagnosis {
	d := driver.DirDiagnosis{Dir: b.dir}
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

var _ driver.Directory = (*fsBackend)(nil)
