// Package storehook carries the store's administrative operations — the
// ones cairn-state's own packages (lock, migrate, boot, rekey, the CLI)
// run and an application never does — from package store, which registers
// them when it is initialised, to [github.com/cairnhq/state/internal/storeadmin],
// which gives them their types. It exists because store cannot import a
// package that names *store.Store (docs/adr/0050).
package storehook

import (
	"context"
	"time"

	"github.com/cairnhq/state/backend"
)

// Ops are the operations, over the store's types: S is *store.Store, M
// storemeta.Manifest and K store.Keys. Each is a method
// expression of *store.Store (the receiver first).
type Ops[S, M, K any] struct {
	Internal           func(s S) S
	Rebind             func(s S, m M, keys K) (S, error)
	CommitManifest     func(s S, ctx context.Context) error
	RecordMigrationLog func(s S, ctx context.Context) error
	ManifestWritten    func(s S) bool
	Key                func(s S, name string) (string, error)
	KeyPrefix          func(s S) string
	Backend            func(s S) backend.Backend
	Now                func(s S, ctx context.Context) (time.Time, error)
	ConditionalWrites  func(s S) bool
}

var registered any

// Register records ops; package store calls it once, from its init.
func Register[S, M, K any](ops *Ops[S, M, K]) { registered = ops }

// Get returns what store registered. It panics when the types differ from
// the registered ones, which the first test that imports storeadmin shows.
func Get[S, M, K any]() *Ops[S, M, K] { return registered.(*Ops[S, M, K]) }

// funcs are the operations registered one by one, by name, each a function
// (a method expression of *store.Store, or a function of package store)
// over the store's types.
var funcs = map[string]any{}

// Set records f as the operation name; package store calls it from its
// init.
func Set(name string, f any) { funcs[name] = f }

// Func returns the operation registered as name. It panics when none is,
// or when its type is not F, which the first test that imports storeadmin
// shows.
func Func[F any](name string) F { return funcs[name].(F) }

// Sealer seals and opens one object bound to its name, for a store made
// with storeadmin.Open; cairn-state's envelope satisfies it. The store
// passes the state name (not the full key), so a store whose root prefix
// moved still opens its objects, while an object copied to another name
// does not open.
type Sealer interface {
	Seal(name string, plaintext []byte) ([]byte, error)
	Open(name string, sealed []byte) ([]byte, error)
}

// Upload is a value sealed into a temporary file by storeadmin.Prepare, to
// be written once by storeadmin.PutUpload: the store's upload.
type Upload interface {
	// Plaintext is the number of plaintext bytes read from the reader.
	Plaintext() int64
	// Close releases the temporary file.
	Close() error
}
