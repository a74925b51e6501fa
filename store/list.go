package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cairnhq/state/backend"
)

// List calls fn for each object whose name starts with prefix, in lexical
// order of names; the backend paginates internally. Reserved names
// (starting with '.') are listed only by cairn-state's own view. List
// stops at the first error fn returns and returns that error unchanged. An
// invalid prefix fails with [ErrInvalidName].
func (s *Store) List(ctx context.Context, prefix string, fn func(Info) error) (err error) {
	var fnErr error
	if m := s.c.metrics; m != nil {
		defer m.endList(ctx, time.Now(), &err, &fnErr)
	}
	if err := validatePrefix(prefix); err != nil {
		return fmt.Errorf("store: list: %w", err)
	}
	err = s.c.b.List(ctx, s.c.prefix+prefix, func(o backend.Object) error {
		name := strings.TrimPrefix(o.Key, s.c.prefix)
		if !s.internal && strings.HasPrefix(name, ".") {
			return nil
		}
		if err := fn(s.info(name, o)); err != nil {
			fnErr = err
			return err
		}
		return nil
	})
	if err != nil {
		if fnErr != nil && errors.Is(err, fnErr) {
			return fnErr
		}
		return fmt.Errorf("store: list %q: %w", prefix, err)
	}
	return nil
}
