package fs

import (
	"context"
	"fmt"
	"io"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/driver"
)

var _ driver.BodyPutter = (*fsBackend)(nil)

// PutBody implements driver.BodyPutter: the body is copied into the temp
// file as it is read, which is then fsynced and renamed as for Put; a body
// that fails or ends early leaves nothing behind.
func (b *fsBackend) PutBody(ctx context.Context, key string, body io.ReaderAt, size int64, opts backend.PutOptions) (backend.Object, error) {
	if err := check(ctx, key); err != nil {
		return backend.Object{}, err
	}
	if opts.IfAbsent && opts.IfVersion != "" {
		return backend.Object{}, fmt.Errorf("put %q: IfAbsent and IfVersion both set: %w", key, backend.ErrUnsupported)
	}
	fill := func(w io.Writer) (int64, error) {
		return io.Copy(w, driver.BodyReader(ctx, body, size))
	}
	return b.write(ctx, "put", key, fill, b.putCondition(key, opts))
}
