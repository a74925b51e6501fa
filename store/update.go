package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Update applies fn to the current value of name (exists is false and old
// nil when the object is absent) and writes fn's result.
//
// On a backend with conditional writes the write is a compare-and-swap
// against the version that was read (or if-absent): when another writer got
// in between, Update reads again and calls fn again, up to
// Options.UpdateAttempts times, then fails with ErrConflict. fn may
// therefore run more than once and must not have side effects beyond
// computing the new value.
//
// On a backend without conditional writes (Garage) Update is read, apply,
// unconditional write: last writer wins, and a concurrent update can be
// lost. The instance lock is what keeps a second writer away there.
//
// An error from fn is returned wrapped, and nothing is written. Under
// Options.RejectRollback an object put back (older than a version kept
// in its history) is refused as Get refuses it, before fn is called.
func (s *Store) Update(ctx context.Context, name string, fn func(old []byte, exists bool) ([]byte, error)) (_ Info, err error) {
	if m := s.c.metrics; m != nil {
		defer m.end(ctx, opUpdate, time.Now(), &err)
	}
	key, err := s.key(name)
	if err != nil {
		return Info{}, fmt.Errorf("store: update: %w", err)
	}
	cas := s.conditionalWrites()
	for attempt := 1; ; attempt++ {
		if err := s.checkFences("update", name); err != nil {
			return Info{}, err
		}
		var (
			old  []byte
			info Info
		)
		if s.strictFor(name) {
			old, info, err = s.getStrict(ctx, key, name)
		} else {
			old, info, err = s.get(ctx, key, name)
		}
		exists := err == nil
		if err != nil && !errors.Is(err, ErrNotFound) {
			return Info{}, err
		}
		next, err := fn(old, exists)
		if err != nil {
			return Info{}, fmt.Errorf("store: update %q: %w", name, err)
		}
		var opts PutOptions
		if cas {
			if exists {
				opts.IfVersion = info.Version
			} else {
				opts.IfAbsent = true
			}
		}
		written, err := s.put(ctx, key, name, next, opts)
		if err == nil {
			return written, nil
		}
		if !cas || !errors.Is(err, ErrPreconditionFailed) {
			return Info{}, err
		}
		if attempt >= s.c.attempts {
			return Info{}, fmt.Errorf("store: update %q: gave up after %d attempts: %w (%w)", name, attempt, ErrConflict, ErrPreconditionFailed)
		}
		s.c.log.DebugContext(ctx, "store: update conflict, retrying", "name", name, "attempt", attempt)
		if err := sleep(ctx, backoff(attempt)); err != nil {
			return Info{}, fmt.Errorf("store: update %q: %w", name, err)
		}
	}
}

// backoff is a jittered exponential delay: 5 ms, 10 ms, 20 ms … capped at
// 500 ms, each scaled by a random factor in [0.5, 1.5) so that writers that
// collided once do not collide again in lockstep.
func backoff(attempt int) time.Duration {
	d := 5 * time.Millisecond << min(attempt-1, 7)
	d = min(d, 500*time.Millisecond)
	return time.Duration(float64(d) * (0.5 + rand.Float64()))
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
