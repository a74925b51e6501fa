// Package lock is the instance lock of cairn-state: one object,
// <root>/.cairn-state/.lock, sealed like all state, that says which instance
// is using the store. An instance takes it before it runs migrations,
// refreshes it while it runs, and releases it on graceful shutdown; a
// second instance pointed at the same store refuses to start with a
// [*HeldError] that names the holder.
//
// # Rules
//
// [Acquire] reads the lock and decides:
//
//   - absent: take it;
//   - same instance id (by default the hostname, which a crash-restarted
//     container keeps): take it over at once;
//   - not refreshed for [Options].StaleAfter (5 minutes by default), or for
//     the longer window its holder recorded in it, judged on the storage's
//     clock (the object's modification time against the storage's now), so
//     instances whose clocks disagree still agree: take it over;
//   - written from this host's PID space by a process that is dead, or
//     whose PID was reused (told apart by the process start time, Linux
//     /proc/<pid>/stat field 22): take it over at once;
//   - unreadable (wrong key after an identity rotation, garbage): take it
//     over with a warning; an advisory lock must never brick a boot.
//     Operator tools set [Options].RefuseUnreadable: their own key may be
//     the wrong one, so they refuse it until it is stale by its age, as
//     [Inspect] and [Break] judge it;
//   - otherwise a live foreign instance holds it: refuse and leave it
//     untouched, or wait for it with [Options].WaitForStale.
//
// Every acquisition writes a new random acquisition id and a fencing epoch
// one above the last: above the record it replaces or, when it finds no
// readable lock, above the epoch that the last release or break saved in a
// second sealed object, <root>/.cairn-state/.lock-epoch ([EpochName]). An
// unreadable saved epoch is logged and ignored, never fatal. A writer that finds its own acquisition id
// on the store holds the lock, so an SDK retry that reports "precondition
// failed" for a write that had in fact landed does not strand the lock.
//
// # Heartbeat and loss
//
// A goroutine refreshes the lock every [Options].HeartbeatInterval (60
// seconds by default). The lock is lost when a heartbeat finds another
// record (or none) in its place, or when no refresh was confirmed for
// StaleAfter less a margin (a tenth, at least 1.5 s for one-second storage
// timestamps) — a paused process, an unreachable storage — because from
// then on another instance may take over. [Lock.Err] checks that horizon
// itself, so a store view fenced with the lock ([store.Store.WithFence])
// refuses writes the moment the process resumes, before any request. Loss
// closes [Lock.Lost] and cancels [Lock.Context]. [Lock.Release] stops the
// goroutine, saves the epoch and deletes the lock only if it still carries
// our acquisition id.
//
// # Modes and honest limits
//
// On a backend with conditional writes (ModeCAS: AWS S3, MinIO, R2,
// versitygw, the fs backend) acquisition, heartbeat and release are
// compare-and-swap: create if absent, replace or delete if the version
// matches. Two acquirers can never both win; acquiring a free lock takes
// three requests (lock, saved epoch, create), a heartbeat one, a release
// three.
//
// On a backend without them (ModeAdvisory: Garage), acquisition is
// read-then-write and therefore racy at the scale of a second: the lock is
// written, then read back after [Options].SettleDelay to catch most racing
// writers, and every heartbeat reads before it writes, so two instances
// that both believed they won learn it within one heartbeat interval. This
// is a tripwire against standing misconfiguration — two deployments
// pointed at one bucket — not consensus. It does not make concurrent
// writers safe, and the store's writes are not fenced on the storage side
// in either mode: a write already sent when the lock is lost still lands.
//
// A server that claims conditional writes but ignores them defeats the
// compare-and-swap mode against racing writers (the lock still reads
// before it acquires, refuses a live holder and never deletes another's
// lock); the S3 backend probes for that and reports such a server as
// lacking conditional writes.
//
// Process liveness is probed only on Linux, where a start time and a PID
// namespace can be read; elsewhere a dead holder with another instance id
// is taken over once its lock goes stale. See docs/adr/0008-instance-lock.md.
package lock
