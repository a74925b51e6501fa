package driver

import (
	"context"
	"errors"

	"github.com/cairnhq/state/backend"
)

// MultiDeleter is implemented by backends that delete several objects in
// one request (S3 DeleteObjects), so that a caller cleaning up a handful
// of objects pays one round trip. Find it with [DeleteMany], which falls
// back to one backend.Backend.Delete per key for a backend without it.
type MultiDeleter interface {
	// DeleteMany removes the objects at keys, unconditionally, each as
	// Delete would. A key that has no object is not a failure. Each key
	// is validated first (backend.ValidateKey): an invalid one fails, and
	// the others are still deleted. The keys are deleted one by one, in no
	// particular order and not atomically: a reader may see some deleted
	// and not others, and after a failure some may be left. The error
	// joins (errors.Join) one error per key that failed, each naming its
	// key and wrapping the backend's sentinel (ErrPermission, say); nil
	// when every key is gone. A context error ends it and is returned
	// as it is. An empty keys sends nothing. It is called through
	// [DeleteMany], which has removed repeated keys.
	DeleteMany(ctx context.Context, keys []string) error
}

// DeleteMany removes the objects at keys on b (see [MultiDeleter] for the
// contract): with b's MultiDeleter, or, for a backend without one, with
// one Delete per key, in order. Duplicate keys are deleted once. Wrappers
// implement MultiDeleter by calling DeleteMany on the backend they wrap,
// so that the innermost backend decides how many requests it takes.
func DeleteMany(ctx context.Context, b backend.Backend, keys []string) error {
	keys = uniqueKeys(keys)
	if len(keys) == 0 {
		return ctx.Err()
	}
	if m, ok := b.(MultiDeleter); ok {
		return m.DeleteMany(ctx, keys)
	}
	var errs []error
	for _, key := range keys {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := b.Delete(ctx, key, backend.DeleteOptions{}); err != nil && !errors.Is(err, backend.ErrNotFound) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// uniqueKeys is keys without repeats, in their first order.
func uniqueKeys(keys []string) []string {
	seen := make(map[string]bool, len(keys))
	out := keys[:0:0]
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// CheckDeleteMany returns ctx's error, or splits keys (without repeats:
// [DeleteMany] removed them) into the valid ones and the errors of the
// invalid ones (each naming its key, wrapping backend.ErrInvalidKey): the
// checks every MultiDeleter makes before it touches storage.
func CheckDeleteMany(ctx context.Context, keys []string) (valid []string, invalid []error, err error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	for _, k := range keys {
		if err := backend.ValidateKey(k); err != nil {
			invalid = append(invalid, err) // it names the key
			continue
		}
		valid = append(valid, k)
	}
	return valid, invalid, nil
}
