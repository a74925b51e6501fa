package store

import (
	"context"
	"sync"
)

// byteBudget bounds the bytes in flight of a bulk read: the sealed bytes
// being read and opened at once. Waiters are served in arrival order, so
// that a large object is not starved by small ones; a request larger than
// the whole budget is charged the whole budget, and so runs alone.
type byteBudget struct {
	mu      sync.Mutex
	max     int64
	used    int64
	waiters []*budgetWaiter
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed once granted
}

func newByteBudget(max int64) *byteBudget { return &byteBudget{max: max} }

// acquire takes n bytes (at most the whole budget) and returns the function
// that gives them back, or ctx's error if ctx ends first.
func (b *byteBudget) acquire(ctx context.Context, n int64) (func(), error) {
	n = max(0, min(n, b.max))
	b.mu.Lock()
	if len(b.waiters) == 0 && b.used+n <= b.max {
		b.used += n
		b.mu.Unlock()
		return b.releaser(n), nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return b.releaser(n), nil
	case <-ctx.Done():
		b.mu.Lock()
		defer b.mu.Unlock()
		select {
		case <-w.ready: // granted meanwhile: give it back
			b.used -= n
			b.grantLocked()
		default:
			for i, x := range b.waiters {
				if x == w {
					b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
					break
				}
			}
			b.grantLocked() // the head may fit now that w left the queue
		}
		return nil, context.Cause(ctx)
	}
}

func (b *byteBudget) releaser(n int64) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			b.used -= n
			b.grantLocked()
			b.mu.Unlock()
		})
	}
}

// grantLocked serves waiters from the head of the queue while they fit.
func (b *byteBudget) grantLocked() {
	for len(b.waiters) > 0 {
		w := b.waiters[0]
		if b.used+w.n > b.max {
			return
		}
		b.used += w.n
		b.waiters = b.waiters[1:]
		close(w.ready)
	}
}
