package fault

import (
	"context"
	"io"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/driver"
)

var _ driver.BodyPutter = (*Backend)(nil)

// PutBody implements driver.BodyPutter by forwarding to the wrapped
// backend's (driver.PutBody: Put of the bytes when it has none). It is
// counted as OpPut and subject to the faults as Put is; a held write
// reads the body into memory when it is held, since its caller may close
// the body before the write is delivered.
func (b *Backend) PutBody(ctx context.Context, key string, body io.ReaderAt, size int64, opts backend.PutOptions) (backend.Object, error) {
	return b.put(ctx, key, opts, func(ctx context.Context, opts backend.PutOptions) (backend.Object, error) {
		return driver.PutBody(ctx, b.inner, key, body, size, opts)
	}, func() ([]byte, error) {
		return driver.ReadBody(ctx, body, size)
	})
}
