// Package state is cairn-state's boot sequence: what an application calls
// to keep its instance state encrypted in a storage backend instead of on
// local disk.
//
// # Boot
//
// [Open] runs five stages, in this order, and an error from any of them is
// an [*OpenError] naming the stage:
//
//  1. backend — parse the URL (file:///abs/path, file:rel/path, a path,
//     or s3://BUCKET[/ROOT]?endpoint=…) and connect;
//  2. envelope — load the age identities (files, or CAIRN_STATE_IDENTITY)
//     and the extra recipients (CAIRN_STATE_RECIPIENTS);
//  3. store — the encrypted state under <root>/.cairn-state/, connected
//     through its manifest (.cairn-state/.store), read before anything
//     else: identities that do not belong to the store make Open fail with
//     an error matching [store.ErrNotMember], a store other than
//     [Config].StoreID with [store.ErrWrongStore], a missing manifest
//     where objects are with [store.ErrManifestMissing], and nothing is
//     written; where nothing is yet, the first boot creates a store and
//     logs its id at warning level (unless StoreID pins one:
//     [store.ErrNoStore]) (docs/adr/0031, 0034);
//  4. lock — take the instance lock; a live foreign holder makes Open fail
//     with an error matching [lock.ErrHeld] that names it;
//  5. migrations — run the configured migrations while the lock is held.
//
// The lock comes before the migrations so that a second instance cannot
// interleave its migrations with a live instance's state (ADR 0009).
//
// # Serving and shutdown
//
// [Instance.Store] is fenced by the lock: once the lock is lost (another
// instance took over after this one stopped heartbeating), every write
// fails and [Instance.Lost] is closed. [Instance.Close] releases the lock;
// call it on graceful shutdown, typically when a context from
// [os/signal.NotifyContext] for SIGTERM and SIGINT is done. If the lock was
// already lost, Close leaves the other holder's lock alone and returns an
// error matching [lock.ErrLost].
//
// # Environment
//
// Libraries below this package never read the environment; [ConfigFromEnv]
// does, for applications and the cairn-state CLI: CAIRN_STATE_URL,
// CAIRN_STATE_IDENTITY, CAIRN_STATE_RECIPIENTS and CAIRN_STATE_STORE_ID.
package state
