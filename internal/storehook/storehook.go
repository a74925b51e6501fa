// Package storehook carries the store's administrative operations — the
// ones cairn-state's own packages (lock, migrate, boot, rekey, the CLI)
// run and an application never does — from package store, which registers
// them when it is initialised, to [github.com/cairnhq/state/internal/storeadmin],
// which gives them their types, and the fence a store's writes go through
// ([Fence], which package lock implements). It exists because store cannot
// import a package that names *store.Store (docs/adr/0050).
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

// Fence reports whether writes are still allowed, and until when, and
// admits each write so that its holder can wait for the writes in flight
// before it lets another holder in: what package lock gives a store it
// fences (lock.Lock.Fence), moved here from package store (docs/adr/0062).
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

// HolderInfo says who holds the lock in one epoch: what a fenced view
// seals into the header of every object it writes as its writer, and
// what store.Store.History shows as a version's instance.
type HolderInfo struct {
	Instance string
	Hostname string
	PID      int
	Epoch    uint64
}

// Holder is a [Fence] that can say who holds it; the lock's fence is
// one. A fenced view whose fence is a Holder names the holder (instance,
// host, process) in the header of every object it writes, encrypted so
// that only a reader of the object learns it (docs/adr/0064), and
// store.Store.History names each version's writer from there.
type Holder interface {
	Fence
	Holder() HolderInfo
}
