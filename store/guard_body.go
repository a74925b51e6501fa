package store

import (
	"context"
	"io"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/driver"
)

var _ driver.BodyPutter = (*guard)(nil)

// PutBody forwards a write from a body (driver.PutBody) unless the key is
// reserved.
func (g *guard) PutBody(ctx context.Context, key string, body io.ReaderAt, size int64, opts backend.PutOptions) (backend.Object, error) {
	if err := g.check("put", key); err != nil {
		return backend.Object{}, err
	}
	return driver.PutBody(ctx, g.Backend, key, body, size, opts)
}
