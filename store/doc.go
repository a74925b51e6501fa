// Package store keeps an application's instance state — keys it generated,
// tokens, small databases — sealed in a storage backend, under the reserved
// folder <root>/.cairn-state/.
//
// A [Store] maps state names ("keys/signing.pem", "db/app.sqlite") to
// objects at <root>/.cairn-state/<name>. Every value is sealed with age
// before it leaves the process and bound to its name, so the storage
// operator sees no value and an object copied to another name does not
// open. A name is UTF-8 of at most [MaxNameLen] bytes, made of
// '/'-separated segments, none of them empty, "." or "..", with no control
// character and no backslash; one that looks like a secret (an age
// identity, a private key) is refused, since names are stored in the
// clear. Names are checked before any storage is touched
// ([ErrInvalidName]); names starting with '.' are cairn-state's own (the
// manifest, the lock, the migration log: [ErrReservedName]).
//
// [Connect] opens a store: it reads the store's manifest
// (<root>/.cairn-state/.store: its id, recipients, generation, lock mode)
// before anything else and refuses an identity the store is not sealed to
// ([ErrNotMember]) or a store other than the pinned one ([ErrWrongStore]),
// writing nothing. Every object is bound to the store id, sealed to the
// manifest's recipient set and stamped with its generation and the
// writer's fencing epoch; an object newer than the manifest is refused
// ([ErrRolledBack]). A store is created only where nothing is and the
// caller allows it ([ConnectOptions].Create); a missing or damaged manifest
// is never re-created (docs/adr/0031-store-manifest-guarded.md).
//
// Each Put is one atomic object write; [Store.Update] is a
// compare-and-swap where the backend has conditional writes and
// last-writer-wins where it has not (Garage); there are no multi-object
// transactions (docs/adr/0007-atomicity-and-the-config-state-line.md).
// A store fenced with the instance lock (lock.Lock.Fence) refuses writes
// once the lock is lost ([ErrFenced]). [PutJSON], [GetJSON] and
// [UpdateJSON] keep typed values with a schema version; [Store.GetMany]
// reads many objects within a byte budget; [Guard] keeps the
// application's own use of the bucket out of the reserved prefix.
// `cairn-state verify` opens every object and reports each one that does
// not open, and why.
//
// Errors name the object and wrap one of the package's sentinels, a
// backend sentinel or a context error, all reachable with errors.Is.
//
// # History
//
// Every write of an application name through a fenced view of a
// connected store keeps the version it writes, and a delete a tombstone,
// under .cairn-state/.history/ ([Options].History versions a name):
// [Store.History], [Store.GetVersion], [Store.Restore], [Store.Undelete]
// and [Store.ListDeleted] read it, and `cairn-state verify` reports a
// current object older than a version its history keeps ([ErrPutBack])
// (docs/history.md, docs/adr/0040 and 0042). A write returns once its
// value is written; the keep of what it wrote goes on behind it, admitted
// by the fence, so that a lock's Release waits for it, and the next write
// or history read of the same name waits for it first (docs/adr/0065).
// Every object names its writer — the holder of the fence it was written
// through — in its header, encrypted (docs/adr/0064).
//
// # Metrics
//
// With [Options].MeterProvider set, the store reports through
// OpenTelemetry (docs/adr/0024), under the scope
// "github.com/cairnhq/state/store": the histogram
// cairn_state.store.operation.duration (seconds) of every operation by
// cairn_state.operation (get, put, delete, list, update, stat;
// history_keep and history_prune for a write's history) and
// cairn_state.outcome (ok, not_found, precondition_failed, conflict,
// fenced, unsupported, invalid_name, too_large, unreadable, permission,
// canceled, timeout, error), and the counter cairn_state.store.io (bytes)
// of sealed bytes by cairn_state.io.direction (read, write). No object
// name, value or key is ever recorded.
package store
