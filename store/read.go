package store

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/cairnhq/state/backend"
)

// readWithin fetches the sealed bytes of key, refusing objects over the
// maximum size without reading them whole: the declared size is checked
// first and the read itself is limited, in case the declared size lied.
// With a budget, the object's declared size (the maximum object size when
// the backend does not declare one) is taken from it once the response
// has come and before the body is read; the caller calls release once it
// is done with the sealed bytes (after opening them). release is never nil.
func (s *Store) readWithin(ctx context.Context, key, name string, budget *byteBudget) (sealed []byte, obj backend.Object, release func(), err error) {
	release = func() {}
	rc, obj, err := s.getWithin(ctx, key, name)
	if err != nil {
		return nil, backend.Object{}, release, err
	}
	defer rc.Close()
	limit := s.c.maxSize
	if budget != nil {
		charge := obj.Size
		if charge < 0 {
			charge = limit
		}
		if release, err = budget.acquire(ctx, charge); err != nil {
			return nil, backend.Object{}, func() {}, fmt.Errorf("store: get %q: %w", name, err)
		}
	}
	hint := obj.Size
	if hint < 0 {
		hint = 0
	}
	buf := make([]byte, 0, hint+1) // +1: the final Read that sees EOF needs no growth
	lr := io.LimitReader(rc, limit+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			release()
			return nil, backend.Object{}, func() {}, s.wrap("get", name, err)
		}
	}
	if int64(len(buf)) > limit {
		release()
		return nil, backend.Object{}, func() {}, s.overRead(name, obj)
	}
	s.c.metrics.moved(ctx, dirRead, len(buf))
	return buf, obj, release, nil
}

// getWithin starts reading key, refusing an object whose declared size is
// over the maximum size; the caller limits its read to that maximum (and
// reports overRead when the declared size lied) and closes the body.
func (s *Store) getWithin(ctx context.Context, key, name string) (io.ReadCloser, backend.Object, error) {
	rc, obj, err := s.c.b.Get(ctx, key)
	if errors.Is(err, backend.ErrCorrupt) {
		return nil, backend.Object{}, fmt.Errorf("store: get %q: %w: %w", name, ErrUnreadable, err)
	}
	if err != nil {
		return nil, backend.Object{}, s.wrap("get", name, err)
	}
	if limit := s.c.maxSize; obj.Size > limit {
		rc.Close()
		return nil, backend.Object{}, fmt.Errorf("store: get %q: %s stored, over the %s limit: %w (%w)", name, mib(obj.Size), mib(limit), ErrTooLarge, ErrUnreadable)
	}
	return rc, obj, nil
}

// overRead is the error of a read that found more than the maximum size.
func (s *Store) overRead(name string, obj backend.Object) error {
	return fmt.Errorf("store: get %q: more than %s read (declared %s): %w (%w)", name, mib(s.c.maxSize), mib(obj.Size), ErrTooLarge, ErrUnreadable)
}
