package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/cairnhq/state/backend"
)

// Prefix is the reserved folder, below the optional root prefix, under which
// all state lives.
const Prefix = ".cairn-state/"

// DefaultMaxObjectSize is the largest sealed object a store accepts when
// Options.MaxObjectSize is zero.
const DefaultMaxObjectSize = 64 << 20

// DefaultUpdateAttempts is how many times Update tries when
// Options.UpdateAttempts is zero.
const DefaultUpdateAttempts = 10

// Sealer seals and opens one object bound to its name. *envelope.Envelope
// satisfies it. The store passes the state name (not the full key), so a
// store whose root prefix moved still opens its objects, while an object
// copied to another name does not open.
type Sealer interface {
	Seal(name string, plaintext []byte) ([]byte, error)
	Open(name string, sealed []byte) ([]byte, error)
}

// Info describes one stored state object.
type Info struct {
	Name    string    // the state name, without root and reserved prefix
	Size    int64     // sealed size in bytes
	Version string    // the backend's version of the sealed object
	ModTime time.Time // last write, on the storage's clock
	// Now is the storage's clock when it answered the request that
	// produced this Info (zero where the backend cannot tell): the
	// object's age is Now − ModTime, judged on one clock.
	Now time.Time
}

// Options configure a Store. The zero value is usable.
type Options struct {
	// Root is an optional root prefix, e.g. "apps/one": objects live at
	// <Root>/.cairn-state/<name>. One trailing '/' is ignored.
	Root string
	// MaxObjectSize is the largest sealed object accepted on write and on
	// read; 0 means DefaultMaxObjectSize.
	MaxObjectSize int64
	// UpdateAttempts bounds how many times Update reads, applies and tries
	// its conditional write before it gives up with ErrConflict; 0 means
	// DefaultUpdateAttempts.
	UpdateAttempts int
	// Logger receives debug records (names only, never values); nil
	// means slog.Default().
	Logger *slog.Logger
	// MeterProvider, when not nil, receives the store's metrics (see
	// "Metrics" in the package doc); nil records none, at no cost.
	MeterProvider metric.MeterProvider
}

// PutOptions are the conditions of a Put (see backend.PutOptions). The zero
// value is an unconditional write; at most one condition may be set.
type PutOptions struct {
	// IfAbsent makes the write succeed only if the object does not exist.
	IfAbsent bool
	// IfVersion, when not empty, makes the write succeed only if the
	// object exists with this version (Info.Version).
	IfVersion string
}

// DeleteOptions are the conditions of a Delete.
type DeleteOptions struct {
	// IfVersion, when not empty, makes the delete succeed only if the
	// object exists with this version.
	IfVersion string
}

// Store is encrypted state under <root>/.cairn-state/ of a backend. A Store
// is a cheap view: [Store.WithFence] and [Store.Internal] return new views
// over the same objects. It is safe for concurrent use.
type Store struct {
	c        *core
	internal bool
	fences   []Fence
}

// core is what all views of one store share.
type core struct {
	b        backend.Backend
	sealer   Sealer
	root     string // normalized root, "" when none
	prefix   string // key prefix: reservedPrefix(root)
	maxSize  int64
	attempts int
	log      *slog.Logger
	metrics  *storeMetrics // nil without a MeterProvider
}

// Open returns a Store over b that seals with s. It touches no storage; it
// fails only for a nil backend or sealer, an invalid Options.Root
// (ErrInvalidRoot), or a MeterProvider that refuses the store's
// instruments.
func Open(b backend.Backend, s Sealer, opts Options) (*Store, error) {
	if b == nil {
		return nil, errors.New("store: open: nil backend")
	}
	if s == nil {
		return nil, errors.New("store: open: nil sealer")
	}
	root, err := normalizeRoot(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("store: open: %w", err)
	}
	m, err := newStoreMetrics(opts.MeterProvider)
	if err != nil {
		return nil, fmt.Errorf("store: open: %w", err)
	}
	c := &core{
		b:        b,
		sealer:   s,
		root:     root,
		prefix:   reservedPrefix(root),
		maxSize:  opts.MaxObjectSize,
		attempts: opts.UpdateAttempts,
		log:      opts.Logger,
		metrics:  m,
	}
	if c.maxSize <= 0 {
		c.maxSize = DefaultMaxObjectSize
	}
	if c.attempts <= 0 {
		c.attempts = DefaultUpdateAttempts
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	return &Store{c: c}, nil
}

// Internal returns a view that also accepts the reserved names starting
// with '.' (the lock, the migration log) and shows them in List. It is for
// cairn-state's own packages; applications use the Store they were given.
// The view keeps this view's fences.
func (s *Store) Internal() *Store {
	v := *s
	v.internal = true
	return &v
}

// Root returns the store's normalized root prefix ("" when none).
func (s *Store) Root() string { return s.c.root }

// KeyPrefix returns the backend key prefix under which the store keeps its
// objects: "<root>/.cairn-state/", or ".cairn-state/" without a root.
func (s *Store) KeyPrefix() string { return s.c.prefix }

// Key returns the backend key of the state object name, or a *NameError.
func (s *Store) Key(name string) (string, error) {
	if err := validateName(name, s.internal); err != nil {
		return "", err
	}
	return s.c.prefix + name, nil
}

// MaxObjectSize returns the largest sealed object the store accepts.
func (s *Store) MaxObjectSize() int64 { return s.c.maxSize }

// Get reads and opens one object. It fails with an error wrapping
// ErrNotFound when the object does not exist, ErrTooLarge when it is larger
// than the maximum object size (without reading it into memory), and the
// sealer's error (for example the envelope's wrong-key or tampered errors)
// when it does not open.
func (s *Store) Get(ctx context.Context, name string) (_ []byte, _ Info, err error) {
	if m := s.c.metrics; m != nil {
		defer m.end(ctx, opGet, time.Now(), &err)
	}
	key, err := s.Key(name)
	if err != nil {
		return nil, Info{}, fmt.Errorf("store: get: %w", err)
	}
	return s.get(ctx, key, name)
}

func (s *Store) get(ctx context.Context, key, name string) ([]byte, Info, error) {
	sealed, obj, err := s.read(ctx, key, name)
	if err != nil {
		return nil, Info{}, err
	}
	plain, _, err := s.open(name, sealed)
	if err != nil {
		return nil, Info{}, err
	}
	return plain, s.info(name, obj), nil
}

// read fetches the sealed bytes of key (see readWithin).
func (s *Store) read(ctx context.Context, key, name string) ([]byte, backend.Object, error) {
	sealed, obj, _, err := s.readWithin(ctx, key, name, nil)
	return sealed, obj, err
}

// Put seals data and writes it as one object, atomically: readers see the
// old object or the new one. With opts.IfAbsent it fails with
// ErrPreconditionFailed when the object exists; with opts.IfVersion when it
// is absent or has another version. On a backend without conditional writes
// any condition fails with ErrUnsupported and nothing is written. A fenced
// view whose fence reports an error refuses with ErrFenced. A sealed object
// over the maximum size is refused with ErrTooLarge.
func (s *Store) Put(ctx context.Context, name string, data []byte, opts PutOptions) (_ Info, err error) {
	if m := s.c.metrics; m != nil {
		defer m.end(ctx, opPut, time.Now(), &err)
	}
	key, err := s.Key(name)
	if err != nil {
		return Info{}, fmt.Errorf("store: put: %w", err)
	}
	return s.put(ctx, key, name, data, opts)
}

func (s *Store) put(ctx context.Context, key, name string, data []byte, opts PutOptions) (Info, error) {
	if (opts.IfAbsent || opts.IfVersion != "") && !s.ConditionalWrites() {
		return Info{}, fmt.Errorf("store: put %q: conditional write on a backend without compare-and-swap: %w", name, ErrUnsupported)
	}
	if err := s.checkFences("put", name); err != nil {
		return Info{}, err
	}
	sealed, err := s.c.sealer.Seal(name, data)
	if err != nil {
		return Info{}, fmt.Errorf("store: put %q: seal: %w", name, err)
	}
	if int64(len(sealed)) > s.c.maxSize {
		return Info{}, fmt.Errorf("store: put %q: %d bytes sealed, limit %d: %w", name, len(sealed), s.c.maxSize, ErrTooLarge)
	}
	return s.putSealed(ctx, key, name, sealed, opts)
}

// Delete removes one object. It fails with an error wrapping ErrNotFound
// when the object does not exist (on backends that can tell), with
// ErrPreconditionFailed when opts.IfVersion is set and does not match, with
// ErrUnsupported for a condition on a backend without conditional writes,
// and with ErrFenced on a fenced view whose fence reports an error.
func (s *Store) Delete(ctx context.Context, name string, opts DeleteOptions) (err error) {
	if m := s.c.metrics; m != nil {
		defer m.end(ctx, opDelete, time.Now(), &err)
	}
	key, err := s.Key(name)
	if err != nil {
		return fmt.Errorf("store: delete: %w", err)
	}
	if opts.IfVersion != "" && !s.ConditionalWrites() {
		return fmt.Errorf("store: delete %q: conditional delete on a backend without compare-and-swap: %w", name, ErrUnsupported)
	}
	ctx, cancel, err := s.fencedContext(ctx, "delete", name)
	if err != nil {
		return err
	}
	defer cancel()
	if err := s.c.b.Delete(ctx, key, backend.DeleteOptions{IfVersion: opts.IfVersion}); err != nil {
		return s.fenceWrap(ctx, "delete", name, err)
	}
	return nil
}

// Stater is an optional side interface of a backend that can describe one
// object without listing or reading it. The store uses it for Stat when the
// backend offers it.
type Stater interface {
	Stat(ctx context.Context, key string) (backend.Object, error)
}

// errStop ends a List early from inside the callback.
var errStop = errors.New("stop listing")

// Stat describes one object without opening it. It fails with an error
// wrapping ErrNotFound when the object does not exist.
func (s *Store) Stat(ctx context.Context, name string) (_ Info, err error) {
	if m := s.c.metrics; m != nil {
		defer m.end(ctx, opStat, time.Now(), &err)
	}
	key, err := s.Key(name)
	if err != nil {
		return Info{}, fmt.Errorf("store: stat: %w", err)
	}
	if st, ok := s.c.b.(Stater); ok {
		obj, err := st.Stat(ctx, key)
		if err != nil {
			return Info{}, s.wrap("stat", name, err)
		}
		return s.info(name, obj), nil
	}
	// Keys come in lexical order, so the exact key, if present, is the
	// first one listed under it as a prefix.
	var found *backend.Object
	err = s.c.b.List(ctx, key, func(o backend.Object) error {
		if o.Key == key {
			found = &o
		}
		return errStop
	})
	if err != nil && !errors.Is(err, errStop) {
		return Info{}, s.wrap("stat", name, err)
	}
	if found == nil {
		return Info{}, fmt.Errorf("store: stat %q: %w", name, ErrNotFound)
	}
	return s.info(name, *found), nil
}

// Now returns the current time on the storage's clock.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	t, err := s.c.b.Now(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("store: storage clock: %w", err)
	}
	return t, nil
}

// ConditionalWrites reports whether the backend enforces the conditions of
// PutOptions and DeleteOptions atomically. When false, Update is
// last-writer-wins.
func (s *Store) ConditionalWrites() bool { return s.c.b.Capabilities().ConditionalWrites }

// Backend returns the backend the store writes to.
func (s *Store) Backend() backend.Backend { return s.c.b }

func (s *Store) info(name string, obj backend.Object) Info {
	return Info{Name: name, Size: obj.Size, Version: obj.Version, ModTime: obj.ModTime, Now: obj.Now}
}

// wrap names the state object in a backend error. Context errors stay
// reachable with errors.Is, as do the backend sentinels.
func (s *Store) wrap(op, name string, err error) error {
	return fmt.Errorf("store: %s %q: %w", op, name, err)
}
