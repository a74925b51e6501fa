package fault

import (
	"context"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/driver"
)

var _ backend.Copier = (*Backend)(nil)

// Copy implements backend.Copier by forwarding to the wrapped backend's
// (driver.Copy: ErrUnsupported when it has none). It is counted as
// OpCopy and subject to the faults as a write: SetIgnoreConditions drops
// its conditions, and its ModTime and Now are shifted by the clock skew.
func (b *Backend) Copy(ctx context.Context, srcKey, dstKey string, opts backend.CopyOptions) (backend.Object, error) {
	skew, err := b.enter(ctx, Call{Op: OpCopy, Key: dstKey, Source: srcKey, IfAbsent: opts.IfAbsent, IfVersion: opts.IfSourceVersion})
	if err != nil {
		return backend.Object{}, err
	}
	b.mu.Lock()
	if b.ignoreConditions {
		opts = backend.CopyOptions{}
	}
	b.mu.Unlock()
	obj, err := driver.Copy(ctx, b.inner, srcKey, dstKey, opts)
	if err != nil {
		return backend.Object{}, err
	}
	return shift(obj, skew), nil
}
