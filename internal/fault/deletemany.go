package fault

import (
	"context"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/driver"
)

var _ driver.MultiDeleter = (*Backend)(nil)

// DeleteMany implements driver.MultiDeleter by forwarding to the wrapped
// backend (driver.DeleteMany: one request where it has a MultiDeleter,
// one Delete per key otherwise). It is one call, counted as OpDeleteMany
// (Call.Key is its first key), and subject to the faults as a write:
// HoldWrites holds it whole when its match accepts any of its keys.
func (b *Backend) DeleteMany(ctx context.Context, keys []string) error {
	c := Call{Op: OpDeleteMany}
	if len(keys) > 0 {
		c.Key = keys[0]
	}
	if _, err := b.enter(ctx, c); err != nil {
		return err
	}
	if _, held, err := b.hold(ctx, keys, func() (func(context.Context) (backend.Object, error), error) {
		keys := append([]string(nil), keys...) // the caller may reuse its slice
		return func(ctx context.Context) (backend.Object, error) {
			return backend.Object{}, driver.DeleteMany(ctx, b.inner, keys)
		}, nil
	}); held {
		return err
	}
	return driver.DeleteMany(ctx, b.inner, keys)
}
