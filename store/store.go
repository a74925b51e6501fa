package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/storehook"
)

// Prefix is the reserved folder, below the optional root prefix, under which
// all state lives.
const Prefix = ".cairn-state/"

// DefaultMaxObjectSize is the largest sealed object a store accepts when
// Options.MaxObjectSize is zero.
const DefaultMaxObjectSize = 64 << 20

// defaultUpdateAttempts is how many times Update tries when
// Options.UpdateAttempts is zero.
const defaultUpdateAttempts = 10

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
	// ID is the version the object's authenticated header names: the
	// fencing epoch and write sequence of the write that made it, what
	// [Store.History] lists and [Store.GetVersion] and [Store.Restore]
	// take. It is set when the object was read and opened (Get, GetMany,
	// Update, GetVersion) or written (Put, Update, Restore) through a
	// connected store; zero from List and Stat, which open nothing, and
	// for an object written by no lock holder (History names such a
	// version by its time, see [VersionID]).
	ID VersionID
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
	// 10.
	UpdateAttempts int
	// Logger receives debug records (names only, never values); nil
	// means slog.Default().
	Logger *slog.Logger
	// MeterProvider, when not nil, receives the store's metrics (see
	// "Metrics" in the package doc); nil records none, at no cost.
	MeterProvider metric.MeterProvider
	// History is how many versions of each application name a fenced
	// view keeps under .cairn-state/.history/, the current one included
	// (see "History" in the package doc): 0 means DefaultHistory, and
	// NoHistory (any negative value) keeps none.
	History int
	// RejectRollback makes Get, GetReader, GetMany and Update refuse,
	// with [ErrPutBack], an object older than a version
	// kept in its own history: an older genuine version put back (Update
	// then calls no function and writes nothing). It costs a listing of
	// the object's history alongside each read (docs/history.md).
	RejectRollback bool
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
// is a cheap view: a fenced view (lock.Lock.Fence) is a new view over the same
// objects. It is safe for concurrent use.
type Store struct {
	c        *core
	internal bool
	fences   []storehook.Fence
	memo     *versionMemo // what the fenced views know of versions (write.go)
}

// core is what all views of one store share.
type core struct {
	b        backend.Backend
	sealer   storehook.Sealer
	root     string // normalized root, "" when none
	prefix   string // key prefix: reservedPrefix(root)
	maxSize  int64
	attempts int
	log      *slog.Logger
	metrics  *storeMetrics  // nil without a MeterProvider
	location string         // names the store in messages (ConnectOptions.Location)
	history  int            // versions kept per name; 0: off (Options.History resolved)
	strict   bool           // Options.RejectRollback
	keeps    *keepsInFlight // keeps behind writes, by key (keep.go); shared by rebinds
}

// openStore returns a Store over b that seals with s. It touches no storage; it
// fails only for a nil backend or sealer, an invalid Options.Root
// (ErrInvalidRoot), or a MeterProvider that refuses the store's
// instruments.
func openStore(b backend.Backend, s storehook.Sealer, opts Options) (*Store, error) {
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
		strict:   opts.RejectRollback,
		keeps:    new(keepsInFlight),
	}
	if c.maxSize <= 0 {
		c.maxSize = DefaultMaxObjectSize
	}
	if c.attempts <= 0 {
		c.attempts = defaultUpdateAttempts
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	switch {
	case opts.History == 0:
		c.history = DefaultHistory
	case opts.History > 0:
		c.history = opts.History
	}
	return &Store{c: c}, nil
}

// internalView returns a view that also accepts the reserved names starting
// with '.' (the lock, the migration log) and shows them in List. It is for
// cairn-state's own packages; applications use the Store they were given.
// The view keeps this view's fences.
func (s *Store) internalView() *Store {
	v := *s
	v.internal = true
	return &v
}

// root returns the store's normalized root prefix ("" when none).
func (s *Store) root() string { return s.c.root }

// keyPrefix returns the backend key prefix under which the store keeps its
// objects: "<root>/.cairn-state/", or ".cairn-state/" without a root.
func (s *Store) keyPrefix() string { return s.c.prefix }

// Key returns the backend key of the state object name, or a
// *storemeta.NameError.
func (s *Store) key(name string) (string, error) {
	if err := validateName(name, s.internal); err != nil {
		return "", err
	}
	return s.c.prefix + name, nil
}

// mib formats a size for the size errors: whole MiB as "64 MiB", other
// sizes from 1 MiB with their bytes too, so that a size just over a limit
// does not read as equal to it.
func mib(n int64) string {
	switch {
	case n < 0:
		return "an unknown size"
	case n < 1<<20:
		return fmt.Sprintf("%d bytes", n)
	case n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	default:
		return fmt.Sprintf("%.2f MiB (%d bytes)", float64(n)/(1<<20), n)
	}
}

// Get reads and opens one object. It fails with an error wrapping
// ErrNotFound when the object does not exist, ErrTooLarge when it is larger
// than the maximum object size (without reading it into memory), and the
// sealer's error (for example the envelope's wrong-key or tampered errors)
// when it does not open.
func (s *Store) Get(ctx context.Context, name string) (_ []byte, _ Info, err error) {
	if m := s.c.metrics; m != nil {
		defer m.end(ctx, opGet, time.Now(), &err)
	}
	key, err := s.key(name)
	if err != nil {
		return nil, Info{}, fmt.Errorf("store: get: %w", err)
	}
	if s.strictFor(name) {
		return s.getStrict(ctx, key, name)
	}
	return s.get(ctx, key, name)
}

func (s *Store) get(ctx context.Context, key, name string) ([]byte, Info, error) {
	sealed, obj, err := s.read(ctx, key, name)
	if err != nil {
		return nil, Info{}, err
	}
	plain, opened, err := s.open(name, sealed)
	if err != nil {
		return nil, Info{}, err
	}
	info := s.info(name, obj)
	info.ID = idOf(opened.Stamp)
	return plain, info, nil
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
	key, err := s.key(name)
	if err != nil {
		return Info{}, fmt.Errorf("store: put: %w", err)
	}
	return s.put(ctx, key, name, data, opts)
}

func (s *Store) put(ctx context.Context, key, name string, data []byte, opts PutOptions) (Info, error) {
	return s.putWith(ctx, key, name, data, opts, nil)
}

// putWith is put, telling res (when not nil) what a write that keeps
// history replaced.
func (s *Store) putWith(ctx context.Context, key, name string, data []byte, opts PutOptions, res *histResult) (Info, error) {
	if (opts.IfAbsent || opts.IfVersion != "") && !s.conditionalWrites() {
		return Info{}, fmt.Errorf("store: put %q: conditional write on a backend without compare-and-swap: %w", name, ErrUnsupported)
	}
	if err := s.checkFences("put", name); err != nil {
		return Info{}, err
	}
	sealed, stamp, err := s.seal(name, data)
	if err != nil {
		return Info{}, fmt.Errorf("store: put %q: seal: %w", name, err)
	}
	if int64(len(sealed)) > s.c.maxSize {
		return Info{}, fmt.Errorf("store: put %q: %s sealed, over the %s limit: %w", name, mib(int64(len(sealed))), mib(s.c.maxSize), ErrTooLarge)
	}
	var info Info
	if s.keepsHistory(name) {
		info, err = s.putKept(ctx, write{op: "put", key: key, name: name, sealed: sealed, put: opts}, stamp, res)
	} else {
		info, err = s.putSealed(ctx, key, name, sealed, opts)
	}
	if err != nil {
		return Info{}, err
	}
	info.ID = idOf(stamp)
	return info, nil
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
	key, err := s.key(name)
	if err != nil {
		return fmt.Errorf("store: delete: %w", err)
	}
	if opts.IfVersion != "" && !s.conditionalWrites() {
		return fmt.Errorf("store: delete %q: conditional delete on a backend without compare-and-swap: %w", name, ErrUnsupported)
	}
	if s.keepsHistory(name) {
		_, err = s.deleteKept(ctx, key, name, opts)
		return err
	}
	_, err = s.send(ctx, write{op: "delete", key: key, name: name, del: true, ifVersion: opts.IfVersion})
	return err
}

// stater is an optional side interface of a backend that can describe one
// object without listing or reading it. The store uses it for Stat when the
// backend offers it.
type stater interface {
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
	key, err := s.key(name)
	if err != nil {
		return Info{}, fmt.Errorf("store: stat: %w", err)
	}
	if st, ok := s.c.b.(stater); ok {
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
func (s *Store) now(ctx context.Context) (time.Time, error) {
	t, err := s.c.b.Now(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("store: storage clock: %w", err)
	}
	return t, nil
}

// conditionalWrites reports whether the backend enforces the conditions of
// PutOptions and DeleteOptions atomically. When false, Update is
// last-writer-wins.
func (s *Store) conditionalWrites() bool { return s.c.b.Capabilities().ConditionalWrites }

// Backend returns the backend the store writes to.
func (s *Store) backend() backend.Backend { return s.c.b }

func (s *Store) info(name string, obj backend.Object) Info {
	s.memo.set(s.c.prefix+name, obj.Version)
	return Info{Name: name, Size: obj.Size, Version: obj.Version, ModTime: obj.ModTime, Now: obj.Now}
}

// wrap names the state object in a backend error. Context errors stay
// reachable with errors.Is, as do the backend sentinels.
func (s *Store) wrap(op, name string, err error) error {
	if op == "get" && errors.Is(err, backend.ErrNotFound) {
		s.memo.set(s.c.prefix+name, memoAbsent)
	}
	return fmt.Errorf("store: %s %q: %w", op, name, err)
}
