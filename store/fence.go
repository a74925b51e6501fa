package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Fence reports whether writes are still allowed, and until when. *lock.Lock
// satisfies it.
type Fence interface {
	// Err returns nil while the holder may write, and an error saying why
	// once it may not (for example, the instance lock was lost).
	Err() error
	// Deadline returns when the holder's current permission to write ends,
	// on this process's clock; ok is false when it has no end. A write sent
	// now must be over by then.
	Deadline() (deadline time.Time, ok bool)
}

// WithFence returns a view of the store whose writes (Put, Delete, Update
// and the JSON helpers) fail with an error wrapping ErrFenced and f.Err()
// once f.Err() is non-nil. Reads are unaffected. Fences accumulate: a view
// of a fenced view checks both. A nil f returns s itself.
//
// Each write checks the fence before sealing and again right before its
// request, and runs under a context deadline at f.Deadline() (the end of the
// lock's lease), so a write cannot be sent, or retried, after the lock may
// have passed to another instance; a write cut off by the deadline fails
// with ErrFenced. A request the server has already received when the
// deadline passes is the one thing the fence cannot recall (ADR 0019 gives
// the window). The lock itself writes through the unfenced store it was
// given.
func (s *Store) WithFence(f Fence) *Store {
	if f == nil {
		return s
	}
	v := *s
	v.fences = append(append([]Fence(nil), s.fences...), f)
	return &v
}

func (s *Store) checkFences(op, name string) error {
	for _, f := range s.fences {
		if err := f.Err(); err != nil {
			return fmt.Errorf("store: %s %q: %w: %w", op, name, ErrFenced, err)
		}
	}
	return nil
}

// errLeaseEnded is the cause of a fenced request's context when the
// fence's deadline passed.
var errLeaseEnded = errors.New("the lock's lease ended before the request completed")

// fencedContext checks the fences and returns ctx bounded by the earliest
// fence deadline.
func (s *Store) fencedContext(ctx context.Context, op, name string) (context.Context, context.CancelFunc, error) {
	if err := s.checkFences(op, name); err != nil {
		return nil, nil, err
	}
	var (
		earliest time.Time
		found    bool
	)
	for _, f := range s.fences {
		if d, ok := f.Deadline(); ok && (!found || d.Before(earliest)) {
			earliest, found = d, true
		}
	}
	if !found {
		return ctx, func() {}, nil
	}
	ctx, cancel := context.WithDeadlineCause(ctx, earliest, errLeaseEnded)
	return ctx, cancel, nil
}

// fenceWrap wraps a write's error: a request cut off by the fence's
// deadline is ErrFenced (with the fence's error when it has one), anything
// else is the backend's error named with the object.
func (s *Store) fenceWrap(ctx context.Context, op, name string, err error) error {
	if errors.Is(context.Cause(ctx), errLeaseEnded) {
		if ferr := s.checkFences(op, name); ferr != nil {
			return fmt.Errorf("%w (the request was cut off: %w)", ferr, err)
		}
		return fmt.Errorf("store: %s %q: %w: %w (%w)", op, name, ErrFenced, errLeaseEnded, err)
	}
	return s.wrap(op, name, err)
}
