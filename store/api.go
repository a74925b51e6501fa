package store

// SKELETON: the exported API agreed between the store, lock, migrate and
// state packages. The store engineer replaces the bodies (and this comment)
// with the implementation; signatures change only by agreement.

import (
	"context"
	"log/slog"
	"time"

	"github.com/cairnhq/state/backend"
)

// Prefix is the reserved folder, below the optional root prefix, under which
// all state lives.
const Prefix = ".cairn-state/"

// Sealer seals and opens one object bound to its name. *envelope.Envelope
// satisfies it.
type Sealer interface {
	Seal(name string, plaintext []byte) ([]byte, error)
	Open(name string, sealed []byte) ([]byte, error)
}

// Fence reports whether writes are still allowed. *lock.Lock satisfies it.
type Fence interface {
	// Err returns nil while the holder may write, and an error saying why
	// once it may not (for example, the instance lock was lost).
	Err() error
}

// Info describes one stored state object.
type Info struct {
	Name    string    // the state name, without root and reserved prefix
	Size    int64     // sealed size in bytes
	Version string    // the backend's version of the sealed object
	ModTime time.Time // last write, on the storage's clock
}

// Options configure a Store.
type Options struct {
	Root          string       // optional root prefix, e.g. "apps/one"
	MaxObjectSize int64        // largest sealed object accepted; 0 means DefaultMaxObjectSize
	Logger        *slog.Logger // nil means slog.Default()
}

// PutOptions are the conditions of a Put (see backend.PutOptions).
type PutOptions struct {
	IfAbsent  bool
	IfVersion string
}

// DeleteOptions are the conditions of a Delete.
type DeleteOptions struct {
	IfVersion string
}

// Store is encrypted state under <root>/.cairn-state/.
type Store struct{ _ int }

// Open returns a Store over b that seals with s.
func Open(b backend.Backend, s Sealer, opts Options) (*Store, error) { panic("SKELETON") }

// WithFence returns a view of the store whose writes fail once f.Err() is
// non-nil. Reads are unaffected.
func (s *Store) WithFence(f Fence) *Store { panic("SKELETON") }

// Internal returns a view that also accepts the reserved names starting
// with '.' (the lock, the migration log). For the library's own packages.
func (s *Store) Internal() *Store { panic("SKELETON") }

// Get reads and opens one object.
func (s *Store) Get(ctx context.Context, name string) ([]byte, Info, error) { panic("SKELETON") }

// Put seals and writes one object.
func (s *Store) Put(ctx context.Context, name string, data []byte, opts PutOptions) (Info, error) {
	panic("SKELETON")
}

// Delete removes one object.
func (s *Store) Delete(ctx context.Context, name string, opts DeleteOptions) error { panic("SKELETON") }

// Stat describes one object without opening it.
func (s *Store) Stat(ctx context.Context, name string) (Info, error) { panic("SKELETON") }

// List calls fn for each object whose name starts with prefix.
func (s *Store) List(ctx context.Context, prefix string, fn func(Info) error) error {
	panic("SKELETON")
}

// Update applies fn to the current value (exists=false when absent) and
// writes its result; atomic where the backend has conditional writes.
func (s *Store) Update(ctx context.Context, name string, fn func(old []byte, exists bool) ([]byte, error)) (Info, error) {
	panic("SKELETON")
}

// Now is the storage's clock.
func (s *Store) Now(ctx context.Context) (time.Time, error) { panic("SKELETON") }

// ConditionalWrites reports whether the backend enforces conditions.
func (s *Store) ConditionalWrites() bool { panic("SKELETON") }

// Backend returns the backend the store writes to.
func (s *Store) Backend() backend.Backend { panic("SKELETON") }
