// Package lock is the instance lock of cairn-state: it says which instance
// is using a store, so that a second instance pointed at the same store
// refuses to start with a [*HeldError] that names the first. An instance
// takes it ([Acquire]) before it runs migrations, a goroutine refreshes it
// while the instance runs, and [Lock.Release] removes it on graceful
// shutdown. Every object of the lock is under <root>/.cairn-state/.lock
// (the prefix [ListPrefix]), sealed like all state but for the epoch
// markers, whose number is their name.
//
// # Live means live
//
// [Acquire] judges what it finds (docs/adr/0019):
//
//   - nothing, or a lock released: take it;
//   - stale — not refreshed for [Options].StaleAfter (5 minutes by
//     default, or the longer window its holder recorded) on the storage's
//     clock, confirmed by the holder's own heartbeat or by watching it; or
//     watched unchanged for the whole window on this process's clock (the
//     storage clock stepped back): take it over;
//   - written from this host's PID space by a process that is dead, or
//     whose PID now belongs to a process with another start (raw clock
//     ticks since boot): take it over at once;
//   - alive on this host with our instance id: refuse, as a duplicate
//     instance id;
//   - our instance id from a PID space we cannot probe (another host, a
//     new PID namespace): watch it; refreshed twice meanwhile (a live
//     process), refuse as a duplicate; not refreshed for one heartbeat
//     interval and a half (a crash-restarted container), take it over;
//   - unreadable — a key this process does not hold, garbage, a corrupt
//     object file: refuse while it is fresh ("held by an instance whose
//     key this process does not hold"), take it over with a warning once
//     stale;
//   - otherwise a live instance holds it: refuse and leave it untouched,
//     or wait for it with [Options].WaitForStale.
//
// # The lease
//
// The holder counts from the send time of its last confirmed write. Its
// fence is open for 1.25 heartbeat intervals: [Lock.Err] is nil, and store
// views fenced with the lock ([store.Store.WithFence]) write, each write
// cut off at [Lock.Deadline]. Past that the lock is suspended (Err matches
// [ErrSuspended], writes are refused) until a heartbeat confirms it again;
// past the stale window less its margin, or as soon as a heartbeat finds
// another holder, a higher epoch or its record gone, it is lost: Err
// matches [ErrLost], [Lock.Lost] closes and [Lock.Context] is cancelled.
// Err checks the lease itself, on the monotonic and the wall clock, so a
// process resumed after a pause refuses writes before it sends any.
//
// A fenced write is cut off by the client at the lease's end; the earliest
// another instance can start is a quarter heartbeat interval later (15 s
// by default, a same-id watcher) or at the stale window (another id). A
// request the server has already received is the one thing the fence
// cannot recall: one the server applies more than that quarter interval
// late can land after a takeover.
//
// # Epochs
//
// Every acquisition whose fence opens has an epoch one above every earlier
// one, across releases, breaks, takeovers of unreadable locks and
// out-of-band deletes: before its fence opens it writes an epoch marker,
// <root>/.cairn-state/.lock.d/epoch-<20 digits>, and the next acquisition
// counts on from the highest marker — which needs no key to read. An
// acquisition that would pass 2^64−1 fails with [ErrEpochExhausted].
//
// # Two protocols, and what they assume
//
// Where the storage enforces conditional puts and deletes ([ModeCAS]: the
// S3 probe finds them on AWS S3 and versitygw; the fs backend) the lock is
// one object, .lock, written with compare-and-swap: acquiring a free lock
// takes a listing, the conditional create, the marker and a second
// listing; a heartbeat one conditional write; a release one conditional
// delete. It assumes the server enforces its conditions.
//
// Where it does not ([ModeClaims]: Garage, which ignores conditions;
// servers that enforce only put conditions, such as MinIO and R2), every
// acquisition writes a claim of its own, .lock.d/claim-<acquisition>, and
// then lists everybody's; it confirms only if no other live claim is in
// sight, all before its intent's deadline (docs/adr/0020). No settle
// delay, no timing assumption about requests: a write may land late or be
// re-sent. It assumes strong list-after-write consistency — a listing
// shows every write that completed before it began — which AWS S3, MinIO,
// versitygw and Garage in its default consistency_mode = "consistent"
// give; under Garage's "degraded" or "dangerous" modes two instances can
// both hold the lock.
//
// Both protocols assume that a paused process's clock closes its own fence
// before anyone else may judge its lock stale (clock rates agree within
// the windows' margins), and they are checked by Promela models with spin
// (lock/model). Staleness is judged on the storage's clock (second
// resolution on S3: keep StaleAfter at 4 s or more there). Process
// liveness is probed only on Linux, where a start time and a PID namespace
// can be read.
//
// The lock guards against a second instance started by mistake, not
// against a hostile one with write access to the bucket: anyone who can
// write the bucket can delete or forge the lock's objects.
//
// # Metrics
//
// With Options.MeterProvider set, the lock reports through OpenTelemetry's
// metric API under the instrumentation scope "github.com/cairnhq/state/lock"
// (docs/adr/0024). Observed at each collection from the [Lock], from its
// acquisition until [Lock.Release] returns:
//
//   - [MetricHeld], cairn_state.lock.held (unit 1): 1 while held, 0 once
//     lost;
//   - [MetricSuspended], cairn_state.lock.suspended (unit 1): 1 while the
//     fence is suspended ([ErrSuspended]);
//   - [MetricEpoch], cairn_state.lock.epoch (unit {epoch}): this holder's
//     fencing epoch;
//   - [MetricHeartbeatAge], cairn_state.lock.heartbeat.age (unit s): the
//     time since the last confirmed write (acquisition or heartbeat).
//
// Counted:
//
//   - [MetricAcquisitions], cairn_state.lock.acquisitions (unit
//     {acquisition}), every Acquire by [AttrOutcome] (cairn_state.outcome:
//     acquired, refused_held, refused_duplicate, refused_unreadable,
//     error);
//   - [MetricLosses], cairn_state.lock.losses (unit {loss}), every loss of
//     a held lock by [AttrLossReason] (cairn_state.lock.loss.reason:
//     taken_over, broken, lease_expired).
//
// A collection reads the lock's state and changes nothing. Without a
// MeterProvider nothing is created or recorded.
package lock
