// Package lockhook carries the lock's administration — Inspect and Break,
// which `cairn-state lock` and doctor run and an application never does —
// from package lock, which registers them when it is initialised, to
// [github.com/cairnhq/state/internal/lockadmin], which gives them their
// types. It holds the types of that administration because lock judges with
// them and cannot import a package that imports lock (docs/adr/0052).
package lockhook

import (
	"context"
	"log/slog"
	"time"
)

// Status is what Inspect found: the lock as an operator sees it, judged by
// the rules Acquire applies. R is lock.Record and M lock.Mode.
type Status[R, M any] struct {
	// Present reports that the lock is held: a held lock object, or a
	// held claim. A released lock object (compare-and-swap mode keeps it,
	// docs/adr/0066) is not: Present is false, and Object, Mode,
	// Readable, Record and Version describe it.
	Present bool
	// Object is the state name of the holder's object (or of the released
	// lock object).
	Object string
	// Mode is the protocol the holder's object belongs to.
	Mode M
	// Readable reports that it opened and holds a lock record.
	Readable bool
	// Liveness is how the lock's rules judge the holder.
	Liveness Liveness
	// Stale reports that Acquire, and Break without force, would take it
	// over now as stale (old on the storage's clock and on the holder's
	// own stamp). A lock old on the storage's clock alone, and an
	// unreadable one, are judged by watching (Liveness Watching), which
	// one look cannot do.
	Stale bool
	// NextBoot says what an instance with another instance id booting now
	// would do, in words.
	NextBoot string
	// Record is the lock record, when readable.
	Record R
	// HeartbeatAge is how long ago the object was last written, on the
	// storage's clock.
	HeartbeatAge time.Duration
	// StaleAfter is the window used to judge staleness: the longer of
	// the one asked for and the one the holder recorded.
	StaleAfter time.Duration
	// StaleIn is how long until the lock goes stale without a refresh.
	StaleIn time.Duration
	// Version is the backend version of the holder's object.
	Version string
	// Unreadable says why the object could not be read, when Present and
	// not Readable.
	Unreadable string
	// Epoch is what the next acquisition counts on from (it takes a
	// higher one): in compare-and-swap mode the lock object's epoch, or
	// the highest epoch marker when the lock object is missing, cannot be
	// read or was created and not yet confirmed; in claims mode the
	// highest epoch marker.
	Epoch uint64
	// Contenders are the other claims in sight: acquisitions in progress,
	// other held claims (a confirm that landed after its sender gave up,
	// a holder taken over), and objects under the lock's prefix that the
	// lock did not write.
	Contenders []Contender[R]
}

// The states of a lock record (lock.Record.State).
const (
	// StateIntent marks a claim of an acquisition in progress.
	StateIntent = "intent"
	// StateHeld marks the lock object or a confirmed claim.
	StateHeld = "held"
	// StateReleased marks a lock object that nobody holds: its holder
	// released it, or an operator broke it (compare-and-swap mode, where
	// the lock object is never deleted; docs/adr/0066). The next
	// acquisition takes it at once, with the next epoch.
	StateReleased = "released"
)

// Contender is one claim other than the holder's.
type Contender[R any] struct {
	Object     string
	State      string // StateIntent or StateHeld; empty when unreadable
	Record     R      // when readable
	Readable   bool
	Unreadable string
	// Age is how long ago it was written, on the storage's clock.
	Age time.Duration
	// Live reports that an acquirer would count it (an intent within the
	// intent window, a held claim judged live).
	Live bool
}

// InspectOptions configure Inspect. The zero value means the defaults.
type InspectOptions struct {
	// StaleAfter is the window to judge staleness by, unless the holder
	// recorded a longer one; zero means 5 minutes.
	StaleAfter time.Duration
	// IntentWindow judges intents, as lock.Options.IntentWindow; zero
	// means the default.
	IntentWindow time.Duration
}

// BreakOptions configure Break. The zero value means the defaults
// (which break only a lock that a boot would take over).
type BreakOptions struct {
	// Holder must be the current holder's instance id for a live lock to
	// be broken (with Force); it guards against breaking a lock that
	// changed hands since the operator looked. It must be empty to break
	// a live unreadable lock, whose holder cannot be read.
	Holder string
	// Force allows breaking a live lock.
	Force bool
	// StaleAfter is the window to judge staleness by, unless the holder
	// recorded a longer one; zero means 5 minutes.
	StaleAfter time.Duration
	// Logger receives what Break did; nil means slog.Default().
	Logger *slog.Logger
}

// Liveness is how the lock's rules judge a holder, for operators.
type Liveness string

// The judgements of a holder.
const (
	// Live: refreshed within the stale window by a holder that is (or may
	// be) running; a boot with another instance id is refused.
	Live Liveness = "live"
	// Duplicate: live, with the judge's own instance id.
	Duplicate Liveness = "duplicate"
	// Stale: not refreshed for the stale window; taken over.
	Stale Liveness = "stale"
	// Dead: its holder ran on this host and is gone (or its PID now
	// belongs to another process); taken over at once.
	Dead Liveness = "dead"
	// MissedHeartbeat: our instance id from a PID space we cannot probe,
	// and not refreshed for one heartbeat and a half of watching; taken
	// over.
	MissedHeartbeat Liveness = "missed heartbeat"
	// Unreadable: it does not open with this process's keys and is not
	// stale yet; refused.
	Unreadable Liveness = "unreadable"
	// UnreadableStale: it does not open and is stale; taken over with a
	// warning.
	UnreadableStale Liveness = "unreadable, stale"
	// Watching: not decided yet; the lock watches it (the storage's clock
	// and the holder's disagree: for up to the stale window; our instance
	// id from a PID space we cannot probe: for a heartbeat and a half).
	Watching Liveness = "watching"
)

// Ops are the operations, over the lock's types: S is *store.Store, R
// lock.Record, M lock.Mode and L *lock.Lock. Guards and Deadline are the
// operations on a held lock.
type Ops[S, R, M, L any] struct {
	Inspect  func(ctx context.Context, st S, o InspectOptions) (Status[R, M], error)
	Break    func(ctx context.Context, st S, o BreakOptions) (R, error)
	Owns     func(name string) bool
	Guards   func(l L, st S) bool
	Deadline func(l L) (time.Time, bool)
}

var registered any

// Register records ops; package lock calls it once, from its init.
func Register[S, R, M, L any](ops *Ops[S, R, M, L]) { registered = ops }

// Get returns what lock registered. It panics when the types differ from
// the registered ones, which the first test that imports lockadmin shows.
func Get[S, R, M, L any]() *Ops[S, R, M, L] { return registered.(*Ops[S, R, M, L]) }
