package store

import (
	"context"
	"fmt"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/driver"
)

var _ backend.Copier = (*guard)(nil)

// Copy forwards a server-side copy (driver.Copy) unless either key is
// reserved: a copy out of the reserved prefix would hand the application
// sealed state, a copy into it would clobber state.
func (g *guard) Copy(ctx context.Context, srcKey, dstKey string, opts backend.CopyOptions) (backend.Object, error) {
	for _, key := range []string{srcKey, dstKey} {
		if g.reserved(key) {
			return backend.Object{}, fmt.Errorf("copy %q to %q: %q: %w", srcKey, dstKey, key, ErrReservedKey)
		}
	}
	return driver.Copy(ctx, g.Backend, srcKey, dstKey, opts)
}
