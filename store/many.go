package store

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// defaultConcurrency is how many objects GetMany reads at once when
// ManyOptions.Concurrency is zero or less.
const defaultConcurrency = 16

// defaultBytesInFlight is how many sealed bytes GetMany reads and opens at
// once when ManyOptions.MaxBytesInFlight is zero or less: one object of the
// default maximum size, or many small ones.
const defaultBytesInFlight = 64 << 20

// ManyOptions bound a bulk read. The zero value means the defaults.
type ManyOptions struct {
	// Concurrency is how many reads are in flight at most; 16 when zero
	// or less.
	Concurrency int
	// MaxBytesInFlight bounds the sealed bytes being read and opened at
	// once, by the sizes the backend declares (an object of unknown size
	// counts as the maximum object size); 64 MiB (one object of the default
	// maximum size) when zero or less. An object larger than the bound is read alone. Values already
	// returned are not counted: GetMany's result holds them all.
	MaxBytesInFlight int64
}

func (o ManyOptions) withDefaults() ManyOptions {
	out := o
	if out.Concurrency <= 0 {
		out.Concurrency = defaultConcurrency
	}
	if out.MaxBytesInFlight <= 0 {
		out.MaxBytesInFlight = defaultBytesInFlight
	}
	return out
}

// Item is one result of GetMany.
type Item struct {
	Name string // the requested name
	Data []byte // the opened value; nil when Err is set
	Info Info   // the object's description; zero when Err is set
	Err  error  // why this object could not be read, naming it
}

// GetMany reads and opens the objects names, bounded by opts (at most
// Concurrency reads, at most MaxBytesInFlight sealed bytes in flight). It
// returns one Item per name, in the order of names, whatever happens to the
// others: a missing or unreadable object does not stop the rest. The
// returned error is nil when every item was read, and otherwise joins the
// items' errors (errors.Is works through it). Once ctx is done, the items
// not yet read fail with ctx's error.
func (s *Store) GetMany(ctx context.Context, names []string, opts ManyOptions) ([]Item, error) {
	items := make([]Item, len(names))
	if len(names) == 0 {
		return items, nil
	}
	s.eachName(ctx, names, opts, func(i int, it Item) { items[i] = it })
	var errs []error
	for _, it := range items {
		if it.Err != nil {
			errs = append(errs, it.Err)
		}
	}
	if len(errs) > 0 {
		return items, &manyError{Errs: errs, Total: len(names)}
	}
	return items, nil
}

// eachName reads names as GetMany does and hands each item to fn (from
// several goroutines, each index once) as soon as it is read; the item's
// budget is given back once fn returns.
func (s *Store) eachName(ctx context.Context, names []string, opts ManyOptions, fn func(i int, it Item)) {
	o := opts.withDefaults()
	budget := newByteBudget(o.MaxBytesInFlight)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(o.Concurrency, len(names)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(names) {
					return
				}
				it, release := s.getItem(ctx, names[i], budget)
				fn(i, it)
				release()
			}
		})
	}
	wg.Wait()
}

// manyError is GetMany's error when some objects could not be read. It
// unwraps to every item's error, so errors.Is(err, ErrNotFound) reports
// whether any object was missing.
type manyError struct {
	Errs  []error // the failed items' errors, in the order of names
	Total int     // how many objects were asked for
}

// Error counts the failures and shows the first few.
func (e *manyError) Error() string {
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
func (e *manyError) Unwrap() []error { return e.Errs }

func (s *Store) getItem(ctx context.Context, name string, budget *byteBudget) (it Item, release func()) {
	if m := s.c.metrics; m != nil {
		defer m.end(ctx, opGet, time.Now(), &it.Err)
	}
	if err := ctx.Err(); err != nil {
		return Item{Name: name, Err: fmt.Errorf("store: get %q: %w", name, err)}, func() {}
	}
	key, err := s.key(name)
	if err != nil {
		return Item{Name: name, Err: fmt.Errorf("store: get: %w", err)}, func() {}
	}
	release = func() {}
	read := func() (Info, error) {
		sealed, obj, rel, err := s.readWithin(ctx, key, name, budget)
		release = rel
		if err != nil {
			return Info{}, err
		}
		plain, opened, err := s.open(name, sealed)
		if err != nil {
			return Info{}, err
		}
		it.Data, it.Info = plain, s.info(name, obj)
		it.Info.ID = idOf(opened.Stamp)
		return it.Info, nil
	}
	if s.strictFor(name) {
		err = s.judged(ctx, name, read)
	} else {
		_, err = read()
	}
	if err != nil {
		return Item{Name: name, Err: err}, release
	}
	it.Name = name
	return it, release
}
