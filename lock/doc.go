// Package lock is the instance lock of cairn-state: it says which instance
// is using a store, so that a second instance pointed at the same store
// refuses to start with a [*HeldError] that names the first. An instance
// takes it ([Acquire]) before it runs migrations, a goroutine refreshes it
// while the instance runs, and [Lock.Release] gives it up on graceful
// shutdown. Every object of the lock is under <root>/.cairn-state/.lock
// (the lock object .lock and the claims and markers below .lock.d/),
// sealed like all state but for the epoch markers, whose number is their
// name.
//
// Acquire judges what it finds by the rule "live means live"
// (docs/adr/0019, 0028): a lock refreshed within Options.StaleAfter on the
// storage's clock, or held by a process this host can see alive, is
// refused (or waited for, Options.WaitForStale); a stale one, one whose
// process is dead, or one unreadable and stale is taken over. The holder's
// fence is open for 1.25 heartbeat intervals after its last confirmed
// write: [Lock.Err] is nil and stores fenced with the lock ([Lock.Fence])
// write; past that it is suspended ([ErrSuspended]) until a heartbeat
// confirms it, and once another may have taken it, lost ([ErrLost],
// [Lock.Lost], [Lock.Context]). Every acquisition has an epoch above every
// earlier one, which every fenced write carries.
//
// Where the storage enforces conditional writes ([ModeCAS]) the lock is
// one object written with compare-and-swap, held or released, which the
// lock never deletes (docs/adr/0066); where it does not ([ModeClaims]:
// Garage, MinIO, R2) every acquisition writes a claim and then lists
// everybody's, which needs strong list-after-write consistency
// (docs/adr/0020), and its release deletes its claims in one request
// without a look (docs/adr/0067). Both are model-checked with spin
// (lock/model). The lock guards against a second instance started by
// mistake, not against a hostile one with write access to the bucket.
//
// docs/lock.md gives the whole protocol, what it guarantees and what it
// assumes, with the figures measured on it.
//
// # Metrics
//
// With Options.MeterProvider set the lock reports through OpenTelemetry
// (docs/adr/0024), under the scope "github.com/cairnhq/state/lock": the
// gauges cairn_state.lock.held, cairn_state.lock.suspended (1 or 0),
// cairn_state.lock.epoch and cairn_state.lock.heartbeat.age (seconds
// since the last confirmed write), observed from acquisition until
// Release returns; the counters cairn_state.lock.acquisitions by
// cairn_state.outcome (acquired, refused_held, refused_duplicate,
// refused_unreadable, error) and cairn_state.lock.losses by
// cairn_state.lock.loss.reason (taken_over, broken, lease_expired).
// docs/lock.md says what each means.
package lock
