// Package migrate runs an application's migrations over its state: an
// ordered Go slice of steps, each run once, only while the instance lock is
// held, with a log of what ran kept in the store itself.
//
// # The contract
//
// A [Migration] has a stable ID, a description and an Up function. Up must be
// idempotent: the runner records a step as started before it calls Up and as
// applied after Up returns nil, so a process killed in the middle of a step
// leaves a "started" record, and the next [Run] runs the step again. A step
// that cannot be run twice sets [Migration.NonRepeatable]; the next Run then
// stops with an [*InterruptedError] whose message names the two calls that
// resolve it: [MarkApplied] when the step's effects are complete, or
// [MarkPending] to run it again from the start.
//
// # The lock
//
// Run takes the [*lock.Lock] as an argument and refuses to start, or to
// begin a further step, unless it is held. Every write of a step and of the
// log goes through a view of the store fenced by that lock, and the context
// given to Up is cancelled when the lock is lost, so a step cannot keep
// writing after another instance took over.
//
// # The log
//
// The log is one sealed JSON object under the reserved state name
// ".migrations": each step's state (pending, started, failed, applied),
// attempts, times, the lock holder that ran it and the notes of
// MarkApplied and MarkPending. `cairn-state migrate status` shows it; an
// interrupted step's [InterruptedError] names its ID. [Run] returns what
// it did ([Result]), and [Logger] gives a step the Run's logger.
//
// # Legacy state
//
// [ImportDir] is a built-in migration that copies a directory of files (an
// application's former on-disk state) into the store, reading every object
// back and comparing it before it counts. It never deletes the source. A
// missing directory fails the boot, naming it, and is not recorded, so a
// volume mounted late is still imported; [ImportDirIfPresent] is for an
// instance that may never have had one.
package migrate
