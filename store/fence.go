package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Fence reports whether writes are still allowed, and until when, and
// admits each write so that its holder can wait for the writes in flight
// before it lets another holder in. lock.Lock.Fence fences a store with
// the lock.
type Fence interface {
	// Err returns nil while the holder may write, and an error saying why
	// once it may not (for example, the instance lock was lost).
	Err() error
	// Deadline returns when the holder's current permission to write ends,
	// on this process's clock; ok is false when it has no end. A write sent
	// now must be over by then.
	Deadline() (deadline time.Time, ok bool)
	// Enter admits one write: it fails with Err's error when writes are
	// not allowed, and otherwise returns done, which the store calls
	// exactly once when the write's requests have ended (answered, failed
	// or cut off). A fence that is being closed (lock.Lock.Release) admits
	// nothing more and waits for every admitted write's done.
	Enter() (done func(), err error)
	// NextWrite returns the holder's fencing epoch and the next number of
	// its write sequence: every call returns a higher sequence number than
	// every earlier call for the same epoch, whichever store view asks.
	// The store seals both into the object it writes (docs/adr/0030).
	NextWrite() (epoch, sequence uint64)
}

// WithFence returns a view of the store whose writes (Put, Delete, Update
// and the JSON helpers) fail with an error wrapping ErrFenced and f.Err()
// once f.Err() is non-nil. Reads are unaffected. Fences accumulate: a view
// of a fenced view checks both. A nil f returns s itself.
//
// Each write checks the fence before sealing, is admitted by it (Enter)
// right before its request, and runs under a context deadline at
// f.Deadline() (the end of the lock's lease), so a write cannot be sent,
// or retried, after the lock may have passed to another instance; a write
// cut off by the deadline fails with ErrFenced and an error that says it
// may still have landed.
//
// On storage with conditional writes every write of a fenced view is
// conditional on the object's version as the view knows it (docs/adr/0026):
// the version it last read, listed or wrote through a view fenced by the
// same fences, absent when it read it absent, and a stat before the write
// when it knows nothing. A write that the server applies late, after
// another holder wrote the object, then fails instead of replacing the
// other's value. Writes that carry conditions of their own keep them. On
// storage without conditions (Garage) a request the server applies after
// the client cut it off is the one thing the fence cannot recall
// (docs/lock.md gives the window). The lock itself writes through the
// unfenced store it was given.
func (s *Store) WithFence(f Fence) *Store {
	if f == nil {
		return s
	}
	v := *s
	v.fences = append(append([]Fence(nil), s.fences...), f)
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
	var (
		earliest time.Time
		found    bool
	)
	for _, f := range s.fences {
		d, err := f.Enter()
		if err != nil {
			leave()
			return nil, nil, fmt.Errorf("store: %s %q: %w: %w", op, name, ErrFenced, err)
		}
		dones = append(dones, d)
		if dl, ok := f.Deadline(); ok && (!found || dl.Before(earliest)) {
			earliest, found = dl, true
		}
	}
	if !found {
		return ctx, leave, nil
	}
	ctx, cancel := context.WithDeadlineCause(ctx, earliest, errLeaseEnded)
	return ctx, func() { cancel(); leave() }, nil
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
