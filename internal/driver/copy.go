package driver

import (
	"context"
	"fmt"

	"github.com/cairnhq/state/backend"
)

// Copy copies srcKey to dstKey on b with b's backend.Copier, or fails
// with an error wrapping backend.ErrUnsupported, copying nothing, when b
// has none. Wrappers implement backend.Copier by calling Copy on the
// backend they wrap, so that the answer for the whole chain is the
// innermost backend's.
func Copy(ctx context.Context, b backend.Backend, srcKey, dstKey string, opts backend.CopyOptions) (backend.Object, error) {
	c, ok := b.(backend.Copier)
	if !ok {
		return backend.Object{}, fmt.Errorf("copy %q to %q: the backend has no server-side copy: %w", srcKey, dstKey, backend.ErrUnsupported)
	}
	return c.Copy(ctx, srcKey, dstKey, opts)
}

// CheckCopy returns ctx's error, then validates a copy's keys and refuses
// a copy of a key onto itself: the checks every backend.Copier makes
// before it touches storage.
func CheckCopy(ctx context.Context, srcKey, dstKey string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := backend.ValidateKey(srcKey); err != nil {
		return err
	}
	if err := backend.ValidateKey(dstKey); err != nil {
		return err
	}
	if srcKey == dstKey {
		return fmt.Errorf("copy %q onto itself: %w", srcKey, backend.ErrUnsupported)
	}
	return nil
}
