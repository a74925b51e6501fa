package fs

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/driver"
)

var _ backend.Copier = (*fsBackend)(nil)

// Copy implements backend.Copier: the source's bytes are copied into a new
// object file for dstKey, with a version of its own, written like a Put
// (temp file, fsync, rename under the lock, directory fsync), so every
// guarantee of Put holds for the copy. The source is the object file that
// was in place when Copy opened it: a Put or Delete of srcKey meanwhile
// replaces or removes the name, not the open file, so the copy holds that
// version's bytes whole; IfSourceVersion is checked against it. IfAbsent
// is checked under the lock, like Put's conditions. Where the file system
// can, the bytes are copied in the kernel (copy_file_range, which shares
// extents on btrfs and XFS).
func (b *fsBackend) Copy(ctx context.Context, srcKey, dstKey string, opts backend.CopyOptions) (backend.Object, error) {
	if err := driver.CheckCopy(ctx, srcKey, dstKey); err != nil {
		return backend.Object{}, err
	}
	src, sobj, err := b.open(srcKey)
	switch {
	case errors.Is(err, backend.ErrNotFound) && opts.IfSourceVersion != "":
		return backend.Object{}, fmt.Errorf("copy %q if version %s: absent: %w", srcKey, opts.IfSourceVersion, backend.ErrPreconditionFailed)
	case err != nil:
		return backend.Object{}, fmt.Errorf("copy %q to %q: %w", srcKey, dstKey, err)
	}
	defer src.Close()
	if opts.IfSourceVersion != "" && sobj.Version != opts.IfSourceVersion {
		return backend.Object{}, fmt.Errorf("copy %q if version %s: version is %s: %w", srcKey, opts.IfSourceVersion, sobj.Version, backend.ErrPreconditionFailed)
	}
	fill := func(w io.Writer) (int64, error) {
		n, err := io.Copy(w, src)
		if err == nil && n != sobj.Size {
			err = fmt.Errorf("copied %d bytes of %q, whose object file holds %d", n, srcKey, sobj.Size)
		}
		return n, err
	}
	return b.write(ctx, "copy to", dstKey, fill, func() error {
		if !opts.IfAbsent {
			return nil
		}
		cur, err := b.currentVersion(dstKey)
		switch {
		case err != nil:
			return err
		case cur != "":
			return fmt.Errorf("copy to %q if absent: exists with version %s: %w", dstKey, cur, backend.ErrPreconditionFailed)
		}
		return nil
	})
}
