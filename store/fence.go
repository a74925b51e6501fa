package store

import "fmt"

// Fence reports whether writes are still allowed. *lock.Lock satisfies it.
type Fence interface {
	// Err returns nil while the holder may write, and an error saying why
	// once it may not (for example, the instance lock was lost).
	Err() error
}

// WithFence returns a view of the store whose writes (Put, Delete, Update
// and the JSON helpers) fail with an error wrapping ErrFenced and f.Err()
// once f.Err() is non-nil. Reads are unaffected. Fences accumulate: a view
// of a fenced view checks both. A nil f returns s itself.
//
// The fence is checked before each write is sent; a write already in
// flight when the lock is lost still lands. The lock itself writes through
// the unfenced store it was given.
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
