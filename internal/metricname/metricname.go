// Package metricname names the OpenTelemetry instruments and attributes
// that cairn-state's packages create (docs/adr/0024), for those packages
// and their tests. An application reads them as the strings docs/lock.md
// and the package docs of lock and store give; they are not part of the
// Go API (docs/adr/0062).
package metricname

// The lock's instruments, created on lock.Options.MeterProvider when it is
// set. The four gauges are observed at each collection from the Lock that
// Acquire returned, from its acquisition until Release returns; the
// counters count every Acquire and every loss. They describe one lock per
// MeterProvider: a process that holds the locks of several stores gives
// each its own provider (or resource).
const (
	// LockHeld is an observable gauge (unit 1): 1 while the lock is held
	// (its fence open or suspended), 0 once it is lost.
	LockHeld = "cairn_state.lock.held"
	// LockSuspended is an observable gauge (unit 1): 1 while the lock is
	// held but its fence is suspended (no heartbeat confirmed within its
	// lease: writes are refused, lock.ErrSuspended), else 0.
	LockSuspended = "cairn_state.lock.suspended"
	// LockEpoch is an observable gauge (unit {epoch}): the fencing epoch
	// of this holder's acquisition.
	LockEpoch = "cairn_state.lock.epoch"
	// LockHeartbeatAge is an observable gauge (unit s): the time since the
	// send time of the last write the lock knows is on the store (the
	// acquisition or the last confirmed heartbeat), on this process's
	// clock. It stays below the heartbeat interval while all is well,
	// passes 1.25 intervals when the fence suspends, and keeps growing
	// after a loss.
	LockHeartbeatAge = "cairn_state.lock.heartbeat.age"
	// LockAcquisitions is a counter (unit {acquisition}) of Acquire calls
	// by outcome (AttrOutcome). An Acquire that waits (WaitForStale) or
	// watches counts once, when it returns.
	LockAcquisitions = "cairn_state.lock.acquisitions"
	// LockLosses is a counter (unit {loss}) of held locks lost, by reason
	// (AttrLossReason).
	LockLosses = "cairn_state.lock.losses"
)

// The store's instruments, created on store.Options.MeterProvider when it
// is set.
const (
	// StoreOperationDuration is a histogram (unit s) of the store's
	// operations by kind (AttrOperation) and outcome (AttrOutcome); its
	// count is the number of operations.
	StoreOperationDuration = "cairn_state.store.operation.duration"
	// StoreIO is a counter (unit By) of sealed bytes moved to and from the
	// storage by direction (AttrIODirection): the bytes of objects read,
	// whether or not they opened, and of objects written.
	StoreIO = "cairn_state.store.io"
)

// The attributes of the instruments; their values are fixed, short lists:
// no object name, value or key is ever recorded.
const (
	// AttrOutcome is how an operation ended. For the store's operations:
	// ok, not_found, precondition_failed, conflict, fenced, unsupported,
	// invalid_name, too_large, unreadable, permission, canceled, timeout
	// or error (see docs/adr/0024 for which error gives which). For the
	// lock's acquisitions:
	// acquired; refused_held (a live instance holds the lock);
	// refused_duplicate (a live process with our instance id holds it,
	// lock.HeldError.Duplicate); refused_unreadable (a fresh lock this
	// process cannot read, lock.HeldError.Unreadable); error (anything
	// else: storage errors, a cancelled context, bad Options). A
	// WaitForStale wait cut off by its context counts as the refusal it
	// was waiting on.
	AttrOutcome = "cairn_state.outcome"
	// AttrLossReason is why a held lock was lost: taken_over (another
	// instance's record, claim or epoch was found in our place); broken
	// (our record or claim was removed, or a higher epoch was found with
	// no holder behind it: a lock break); lease_expired (no heartbeat
	// could be confirmed before the stale window less its margin).
	AttrLossReason = "cairn_state.lock.loss.reason"
	// AttrOperation is the store method: get, put, delete, list, update
	// or stat. GetMany counts a get per object, the JSON helpers count as
	// the method they call. A write that keeps history also counts its
	// parts of its own: history_keep for each version it keeps (a copy or
	// a put of the written bytes, and the keep of a version found not
	// kept yet), history_prune for each entry it prunes beyond the
	// retention (docs/adr/0060).
	AttrOperation = "cairn_state.operation"
	// AttrIODirection is read or write.
	AttrIODirection = "cairn_state.io.direction"
)
