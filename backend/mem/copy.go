package mem

import (
	"context"
	"fmt"
	"strconv"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/driver"
)

var _ backend.Copier = (*memBackend)(nil)

// Copy implements backend.Copier. Both conditions are enforced atomically,
// unless the backend was made without conditional writes: then a
// conditional copy fails with backend.ErrUnsupported.
func (b *memBackend) Copy(ctx context.Context, srcKey, dstKey string, opts backend.CopyOptions) (backend.Object, error) {
	if err := driver.CheckCopy(ctx, srcKey, dstKey); err != nil {
		return backend.Object{}, err
	}
	if (opts.IfSourceVersion != "" || opts.IfAbsent) && b.opts.NoConditionalWrites {
		return backend.Object{}, fmt.Errorf("copy %q to %q: conditional copy: %w", srcKey, dstKey, backend.ErrUnsupported)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	src, ok := b.objects[srcKey]
	switch {
	case opts.IfSourceVersion != "" && (!ok || src.obj.Version != opts.IfSourceVersion):
		return backend.Object{}, fmt.Errorf("copy %q if version %s: %w", srcKey, opts.IfSourceVersion, backend.ErrPreconditionFailed)
	case !ok:
		return backend.Object{}, fmt.Errorf("copy %q: %w", srcKey, backend.ErrNotFound)
	}
	if _, exists := b.objects[dstKey]; opts.IfAbsent && exists {
		return backend.Object{}, fmt.Errorf("copy to %q if absent: %w", dstKey, backend.ErrPreconditionFailed)
	}
	b.seq++
	now := b.now()
	obj := backend.Object{Key: dstKey, Size: src.obj.Size, Version: strconv.FormatUint(b.seq, 10), ModTime: now}
	// Stored bytes are never changed in place, so the copy shares them.
	b.objects[dstKey] = entry{data: src.data, obj: obj}
	obj.Now = now
	return obj, nil
}
