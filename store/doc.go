// Package store keeps an application's instance state — keys it generated,
// tokens, small databases — sealed in a storage backend, under the reserved
// folder <root>/.cairn-state/.
//
// A [Store] maps state names ("keys/signing.pem", "db/app.sqlite") to
// objects at <root>/.cairn-state/<name>. Every value is sealed by a
// [Sealer] (in practice *envelope.Envelope) before it leaves the process,
// and bound to its name, so the storage operator sees no value and an
// object copied to another name does not open. The binding is to the
// state name, not to the full key: a store whose root prefix moved still
// opens its objects.
//
// # Store identity
//
// [Connect] is how applications and tools open a store: it reads the
// store's [Manifest] (<root>/.cairn-state/.store, sealed like all state:
// a store id, the store format, the creation time, the recipients every
// object is sealed to, a key generation) before anything else, and refuses
// identities that cannot open it with a [*NotMemberError] ([ErrNotMember])
// — nothing is written, the lock is not touched. The store it returns
// binds every object to the store id (an object copied from another store
// fails with envelope.ErrForeignStore) and seals to the manifest's
// recipient set, whatever the configuration says ([Store.RecipientDiff]
// reports the difference). The first write-capable connection creates the
// manifest: if absent where the backend has conditional writes, else by
// [Store.CommitManifest] under the instance lock. A garbage manifest is a
// [*ManifestError], never re-created. Recovery identities
// ([Keys].Recovery) open only the application's objects, never the
// reserved ones. See docs/adr/0021-store-manifest-and-membership.md.
// [Open] makes a store over any Sealer, with no manifest: for tests and
// tools below the identity layer.
//
// # Names
//
// Names are '/'-separated, relative, and checked before any storage is
// touched ([ValidateName]): empty names, absolute names, "." and ".."
// segments, control characters, backslashes and names over [MaxNameLen]
// bytes are refused with a [*NameError] (errors.Is(err, [ErrInvalidName])).
// Names starting with '.' are reserved for cairn-state's own objects (the
// manifest ".store", the lock ".lock", the migration log ".migrations",
// rekey's progress ".rekey"); only the [Store.Internal] view accepts and
// lists them.
//
// # Writes and atomicity
//
// Each Put is one object write: readers see the old or the new value,
// never a mix. [Store.Update] is a read-modify-write that is atomic
// (compare-and-swap, retried on conflict a bounded number of times) on
// backends with conditional writes, and last-writer-wins on backends
// without them, such as Garage; [Store.ConditionalWrites] says which. There
// are no multi-object transactions. See docs/adr/0007-atomicity-and-the-config-state-line.md.
//
// # Fencing
//
// [Store.WithFence] returns a view whose writes fail with [ErrFenced] once
// its [Fence] — the instance lock — reports that the lock was lost. Reads
// keep working.
//
// # Size limit
//
// A store accepts sealed objects up to Options.MaxObjectSize
// ([DefaultMaxObjectSize] by default). Larger writes are refused; larger
// (or hostile, endless) stored objects fail to read with [ErrTooLarge]
// without being read into memory.
//
// # Typed values and bulk reads
//
// [PutJSON], [GetJSON] and [UpdateJSON] keep JSON values together with the
// application's schema version, so a reader can tell an old value from a
// new one; their errors never quote the stored value. [Store.GetMany]
// reads many objects bounded by count and by sealed bytes in flight
// ([ManyOptions]); [Store.Verify] checks every object the same way.
//
// # Sharing a bucket with the application
//
// [Guard] wraps a backend for the application's own objects in the same
// bucket or directory: it refuses every operation under the reserved
// prefix and hides it from listings, so application code cannot read or
// clobber state.
//
// # Metrics
//
// With Options.MeterProvider set, the store reports through OpenTelemetry's
// metric API, under the instrumentation scope
// "github.com/cairnhq/state/store" (docs/adr/0024):
//
//   - [MetricOperationDuration], cairn_state.store.operation.duration, a
//     histogram in seconds (unit s) of every Get, Put, Delete, List,
//     Update and Stat, with the attributes [AttrOperation]
//     (cairn_state.operation: get, put, delete, list, update, stat) and
//     [AttrOutcome] (cairn_state.outcome: ok, not_found,
//     precondition_failed, conflict, fenced, unsupported, invalid_name,
//     too_large, unreadable, permission, canceled, timeout, error); its
//     count is the number of operations;
//   - [MetricIO], cairn_state.store.io, a counter of sealed bytes (unit
//     By) read from the storage and written to it, with [AttrIODirection]
//     (cairn_state.io.direction: read, write).
//
// The lock's and the migration log's own requests go through the store
// and count too. No attribute carries an object's name or value. Without
// a MeterProvider the store reads no clock and allocates nothing for
// metrics.
//
// # Errors
//
// Errors name the object and wrap a sentinel: [ErrNotFound] (which is
// backend.ErrNotFound), [ErrPreconditionFailed], [ErrUnsupported],
// [ErrInvalidName], [ErrReservedName], [ErrTooLarge], [ErrFenced],
// [ErrConflict], [ErrBadJSON], [ErrReservedKey], [ErrNotMember],
// [ErrBadManifest], [ErrNoManifest], [ErrManifestChanged], or the sealer's own errors
// (wrong key, tampered) and context errors, all reachable with errors.Is.
package store
