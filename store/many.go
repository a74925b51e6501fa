package store

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
)

// DefaultConcurrency is how many objects GetMany reads at once when asked
// for zero or fewer.
const DefaultConcurrency = 16

// Item is one result of GetMany.
type Item struct {
	Name string // the requested name
	Data []byte // the opened value; nil when Err is set
	Info Info   // the object's description; zero when Err is set
	Err  error  // why this object could not be read, naming it
}

// GetMany reads and opens the objects names with at most concurrency reads
// in flight (DefaultConcurrency when concurrency ≤ 0). It returns one Item
// per name, in the order of names, whatever happens to the others: a
// missing or unreadable object does not stop the rest. The returned error
// is nil when every item was read, and otherwise joins the items' errors
// (errors.Is works through it). Once ctx is done, the items not yet read
// fail with ctx's error.
func (s *Store) GetMany(ctx context.Context, names []string, concurrency int) ([]Item, error) {
	items := make([]Item, len(names))
	if len(names) == 0 {
		return items, nil
	}
	if concurrency <= 0 {
		concurrency = DefaultConcurrency
	}
	concurrency = min(concurrency, len(names))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(names) {
					return
				}
				items[i] = s.getItem(ctx, names[i])
			}
		})
	}
	wg.Wait()
	var errs []error
	for _, it := range items {
		if it.Err != nil {
			errs = append(errs, it.Err)
		}
	}
	if len(errs) > 0 {
		return items, &ManyError{Errs: errs, Total: len(names)}
	}
	return items, nil
}

// ManyError is GetMany's error when some objects could not be read. It
// unwraps to every item's error, so errors.Is(err, ErrNotFound) reports
// whether any object was missing.
type ManyError struct {
	Errs  []error // the failed items' errors, in the order of names
	Total int     // how many objects were asked for
}

// Error counts the failures and shows the first few.
func (e *ManyError) Error() string {
	const shown = 3
	var b strings.Builder
	fmt.Fprintf(&b, "store: get many: %d of %d objects failed: ", len(e.Errs), e.Total)
	for i, err := range e.Errs[:min(shown, len(e.Errs))] {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(err.Error())
	}
	if len(e.Errs) > shown {
		fmt.Fprintf(&b, "; and %d more", len(e.Errs)-shown)
	}
	return b.String()
}

// Unwrap returns the items' errors.
func (e *ManyError) Unwrap() []error { return e.Errs }

func (s *Store) getItem(ctx context.Context, name string) Item {
	if err := ctx.Err(); err != nil {
		return Item{Name: name, Err: fmt.Errorf("store: get %q: %w", name, err)}
	}
	data, info, err := s.Get(ctx, name)
	return Item{Name: name, Data: data, Info: info, Err: err}
}
