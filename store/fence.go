package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairnhq/state/internal/storehook"
)

// withFence is storeadmin.WithFence: a view of s fenced by f as well.
func (s *Store) withFence(f storehook.Fence) *Store {
	if f == nil {
		return s
	}
	v := *s
	v.fences = append(append([]storehook.Fence(nil), s.fences...), f)
	v.memo = newVersionMemo()
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

// enterFences admits one write through every fence and returns ctx
// bounded by the earliest fence deadline; done ends the admission.
func (s *Store) enterFences(ctx context.Context, op, name string) (context.Context, func(), error) {
	dones := make([]func(), 0, len(s.fences))
	leave := func() {
		for _, d := range dones {
			d()
		}
	}
	for _, f := range s.fences {
		d, err := f.Enter()
		if err != nil {
			leave()
			return nil, nil, fmt.Errorf("store: %s %q: %w: %w", op, name, ErrFenced, err)
		}
		dones = append(dones, d)
	}
	earliest, found := s.fencesDeadline()
	if !found {
		return ctx, leave, nil
	}
	ctx, cancel := context.WithDeadlineCause(ctx, earliest, errLeaseEnded)
	return ctx, func() { cancel(); leave() }, nil
}

// fencesDeadline is the earliest of the fences' deadlines; found is false
// when none has one.
func (s *Store) fencesDeadline() (earliest time.Time, found bool) {
	for _, f := range s.fences {
		if dl, ok := f.Deadline(); ok && (!found || dl.Before(earliest)) {
			earliest, found = dl, true
		}
	}
	return earliest, found
}

// fenceWrap wraps a write's error: a request cut off by the fence's
// deadline is ErrFenced (with the fence's error when it has one), anything
// else is the backend's error named with the object. A request cut off by
// its context, either way, may still have landed, and the error says so.
func (s *Store) fenceWrap(ctx context.Context, op, name string, err error) error {
	if errors.Is(context.Cause(ctx), errLeaseEnded) {
		if ferr := s.checkFences(op, name); ferr != nil {
			return fmt.Errorf("%w (the request was cut off at the lease's end and may still have landed: %w)", ferr, err)
		}
		return fmt.Errorf("store: %s %q: %w: %w (the request was cut off and may still have landed: %w)", op, name, ErrFenced, errLeaseEnded, err)
	}
	if len(s.fences) > 0 && ctx.Err() != nil {
		return fmt.Errorf("store: %s %q: the request was cut off and may still have landed: %w", op, name, err)
	}
	return s.wrap(op, name, err)
}
