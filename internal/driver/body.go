package driver

import (
	"context"
	"fmt"
	"io"

	"github.com/cairnhq/state/backend"
)

// BodyPutter is implemented by backends that write an object from a body
// read where it lies (a file the caller spooled) instead of from a byte
// slice, so that a large object is never held in memory whole. Find it
// with [PutBody], which falls back to backend.Backend.Put for a backend
// without it.
type BodyPutter interface {
	// PutBody writes the size bytes of body at offsets [0, size) at key,
	// exactly as Put writes data: atomically, under the same conditions,
	// with the same errors and the same durability. It reads nothing of
	// body beyond size. When body ends before size bytes, PutBody fails
	// with an error wrapping io.ErrUnexpectedEOF; when a read fails, with
	// an error wrapping the read's; either way nothing is written.
	//
	// Body may be read more than once (a retry resends it from the
	// start), by more than one goroutine at a time (a retry starts while
	// an abandoned attempt is still being torn down), and by such a torn
	// down attempt even after PutBody returned: body's bytes must not
	// change while the caller keeps it readable (closing a file is fine:
	// a late read then fails, and a request whose body fails is not
	// completed).
	PutBody(ctx context.Context, key string, body io.ReaderAt, size int64, opts backend.PutOptions) (backend.Object, error)
}

// PutBody writes the first size bytes of body at key on b: through b's
// [BodyPutter], or, for a backend without one, by reading them into memory
// and calling Put. Wrappers implement BodyPutter by calling PutBody on the
// backend they wrap, so that the innermost backend decides.
func PutBody(ctx context.Context, b backend.Backend, key string, body io.ReaderAt, size int64, opts backend.PutOptions) (backend.Object, error) {
	if bp, ok := b.(BodyPutter); ok {
		return bp.PutBody(ctx, key, body, size, opts)
	}
	data, err := ReadBody(ctx, body, size)
	if err != nil {
		return backend.Object{}, fmt.Errorf("put %q: %w", key, err)
	}
	return b.Put(ctx, key, data, opts)
}

// BodyReader returns a reader of body's bytes [0, size), for a
// [BodyPutter] that copies a body: its reads fail with an error wrapping
// io.ErrUnexpectedEOF when body ends before size, with an error wrapping
// a failed read's, and with ctx's error once ctx is done.
func BodyReader(ctx context.Context, body io.ReaderAt, size int64) io.Reader {
	return &bodyReader{ctx: ctx, r: io.NewSectionReader(body, 0, size), size: size}
}

// ReadBody reads body's bytes [0, size) into memory, with BodyReader's
// errors.
func ReadBody(ctx context.Context, body io.ReaderAt, size int64) ([]byte, error) {
	if size < 0 {
		return nil, fmt.Errorf("reading the body: negative size %d", size)
	}
	buf := make([]byte, size)
	if _, err := io.ReadFull(BodyReader(ctx, body, size), buf); err != nil {
		return nil, err
	}
	return buf, nil
}

type bodyReader struct {
	ctx  context.Context
	r    *io.SectionReader
	size int64
	off  int64
}

func (b *bodyReader) Read(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := b.r.Read(p)
	b.off += int64(n)
	switch {
	case err == io.EOF && b.off < b.size:
		return n, fmt.Errorf("reading the body: %w after %d of %d bytes", io.ErrUnexpectedEOF, b.off, b.size)
	case err != nil && err != io.EOF:
		return n, fmt.Errorf("reading the body at byte %d: %w", b.off, err)
	}
	return n, err
}
