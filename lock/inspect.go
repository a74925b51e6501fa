package lock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/store"
)

// Status is what [Inspect] found: the lock as an operator sees it, judged
// by the rules Acquire applies.
type Status struct {
	// Present reports that a holder's object exists: the lock object or a
	// held claim.
	Present bool
	// Object is the state name of the holder's object.
	Object string
	// Mode is the protocol the holder's object belongs to.
	Mode Mode
	// Readable reports that it opened and holds a lock record.
	Readable bool
	// Liveness is how the lock's rules judge the holder.
	Liveness Liveness
	// Stale reports that Acquire would take it over as stale (or, for an
	// unreadable one, once it has watched it for a heartbeat and a half).
	Stale bool
	// NextBoot says what an instance with another instance id booting now
	// would do, in words.
	NextBoot string
	// Record is the lock record, when readable.
	Record Record
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
	// Epoch is the highest epoch marker on the store (what the next
	// acquisition counts on from).
	Epoch uint64
	// Contenders are the other claims in sight: acquisitions in progress,
	// other held claims (a confirm that landed after its sender gave up,
	// a holder taken over), and objects under the lock's prefix that the
	// lock did not write.
	Contenders []Contender
}

// Contender is one claim other than the holder's.
type Contender struct {
	Object     string
	State      string // StateIntent or StateHeld; empty when unreadable
	Record     Record // when readable
	Readable   bool
	Unreadable string
	// Age is how long ago it was written, on the storage's clock.
	Age time.Duration
	// Live reports that an acquirer would count it (an intent within the
	// intent window, a held claim judged live).
	Live bool
}

// InspectOptions configure [Inspect]. A nil *InspectOptions means the
// defaults.
type InspectOptions struct {
	// StaleAfter is the window to judge staleness by, unless the holder
	// recorded a longer one; zero means DefaultStaleAfter.
	StaleAfter time.Duration
	// IntentWindow judges intents, as Options.IntentWindow; zero means
	// the default.
	IntentWindow time.Duration
}

// Inspect reads the lock of st without changing anything, for `cairn-state
// lock status`, and judges it as an acquirer with another instance id
// would. An absent lock is a Status with Present false, not an error.
func Inspect(ctx context.Context, st *store.Store, opts *InspectOptions) (Status, error) {
	var o InspectOptions
	if opts != nil {
		o = *opts
	}
	a, err := judgeOnly(st, o.StaleAfter, o.IntentWindow, nil)
	if err != nil {
		return Status{}, err
	}
	v, err := a.scan.scan(ctx)
	if err != nil {
		return Status{}, err
	}
	s := Status{StaleAfter: a.o.StaleAfter, Epoch: v.maxMarker()}
	holder, err := a.holder(ctx, v)
	if err != nil {
		return Status{}, err
	}
	now := time.Now()
	if holder != nil {
		vd := a.judge(holder, now)
		s.Present, s.Object, s.Readable, s.Version = true, holder.name, holder.readable, holder.info.Version
		s.Mode = ModeCAS
		if holder.kind != kindLock {
			s.Mode = ModeClaims
		}
		s.Liveness = vd.label
		s.HeartbeatAge = holder.age
		h := a.heldError(holder, a.window(holder), 0)
		s.StaleAfter, s.StaleIn = h.StaleAfter, h.StaleIn
		s.Stale = vd.label == Stale || vd.label == UnreadableStale || (vd.label == Watching && !holder.anomaly && holder.age >= h.StaleAfter)
		if holder.readable {
			s.Record = holder.rec
		} else if holder.why != nil {
			s.Unreadable = holder.why.Error()
		}
		s.NextBoot = nextBoot(vd, a)
	} else {
		s.NextBoot = "acquire it at once: no instance holds the lock"
	}
	for _, e := range append(append(append([]*entry{}, v.helds...), v.intents...), v.unknown...) {
		if holder != nil && (e.name == holder.name || e.acq != "" && e.acq == holder.acq) {
			continue // the holder's own (an intent its clean-up has not deleted yet)
		}
		c := Contender{Object: e.name, Age: e.age}
		switch e.kind {
		case kindIntent:
			c.State, c.Live = StateIntent, a.intentLive(e, now)
			if gone, err := a.scan.read(ctx, e); err != nil {
				return Status{}, err
			} else if gone {
				continue
			}
		case kindHeld, kindUnknown:
			if e.kind == kindUnknown {
				e.read, e.why = true, fmt.Errorf("%w: a name the lock does not write", errMalformed)
			} else if gone, err := a.scan.read(ctx, e); err != nil {
				return Status{}, err
			} else if gone {
				continue
			}
			if e.kind == kindHeld {
				c.State = StateHeld
			}
			c.Live = a.judge(e, now).kind == vRefuse
		}
		c.Readable, c.Record = e.readable, e.rec
		if !e.readable && e.why != nil {
			c.Unreadable = e.why.Error()
		}
		s.Contenders = append(s.Contenders, c)
	}
	return s, nil
}

// window is the stale window a record is judged by.
func (a *acquirer) window(e *entry) time.Duration {
	if e.readable {
		return max(a.o.StaleAfter, e.rec.StaleAfter)
	}
	return a.o.StaleAfter
}

// nextBoot says what a booting instance with another id would do.
func nextBoot(vd verdict, a *acquirer) string {
	switch vd.label {
	case Stale, Dead:
		return "take it over at once: " + vd.reason
	case UnreadableStale:
		return "take it over with a warning: " + vd.reason
	case Watching:
		if vd.held.Unreadable != "" {
			return fmt.Sprintf("watch it for up to %s, then take it over with a warning unless it is rewritten: it does not open with this process's keys and is old on the storage's clock, which nothing in it can confirm", a.o.missedHeartbeat(0))
		}
		return fmt.Sprintf("watch it for up to %s before deciding (its age on the storage's clock and its holder's own heartbeat disagree)", a.o.missedHeartbeat(vd.held.Holder.HeartbeatInterval))
	case Unreadable:
		return fmt.Sprintf("refuse to start until it is stale (in %s): it does not open with this process's keys", roundAge(vd.held.StaleIn))
	}
	return fmt.Sprintf("refuse to start until it is released or stale (in %s)", roundAge(vd.held.StaleIn))
}

// judgeOnly is an acquirer that judges but never writes (Inspect, Break):
// an instance id no holder has, this process's PID space.
func judgeOnly(st *store.Store, staleAfter, intentWindow time.Duration, log *slog.Logger) (*acquirer, error) {
	if staleAfter <= 0 {
		staleAfter = DefaultStaleAfter
	}
	o, err := Options{InstanceID: "\x00operator", StaleAfter: staleAfter, IntentWindow: intentWindow, Logger: log}.withDefaults()
	if err != nil {
		return nil, err
	}
	hostname, _ := os.Hostname()
	in := st.Internal()
	return &acquirer{st: in, scan: scanner{st: in}, o: o, log: o.Logger, self: selfProcess(), hostname: hostname, seen: watcher{}, mine: map[string]bool{}}, nil
}

// holder is the record that holds the lock: the lock object, else the held
// claim with the highest epoch (an unreadable one when none reads). Nil
// when there is none.
func (a *acquirer) holder(ctx context.Context, v view) (*entry, error) {
	var best, unreadable *entry
	for _, e := range v.records() {
		gone, err := a.scan.read(ctx, e)
		if err != nil {
			return nil, err
		}
		switch {
		case gone:
		case e.kind == kindLock:
			return e, nil
		case !e.readable:
			if unreadable == nil {
				unreadable = e
			}
		case best == nil || e.rec.Epoch > best.rec.Epoch:
			best = e
		}
	}
	if best == nil {
		best = unreadable
	}
	return best, nil
}

// BreakOptions configure [Break]. A nil *BreakOptions means the defaults
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
	// recorded a longer one; zero means DefaultStaleAfter.
	StaleAfter time.Duration
	// Logger receives what Break did; nil means slog.Default().
	Logger *slog.Logger
}

// Break removes the lock of st for an operator (`cairn-state lock break`):
// a lock that a boot would take over (stale, or held by a dead process of
// this host), readable or not, always; a live readable one only with
// opts.Force and opts.Holder equal to the holder's instance id; a live
// unreadable one (sealed to keys not configured here, so it may belong to a
// running instance) only with opts.Force and no opts.Holder. Otherwise it
// fails with a *HeldError and leaves the lock alone. It returns the record
// it removed (zero for an unreadable one), and fails with an error wrapping
// backend.ErrNotFound when no instance holds the lock.
//
// Break first writes an epoch marker above the holder's, so that the
// holder learns at its next heartbeat that it lost the lock and the next
// acquisition counts on from there; then it deletes the holder's object (in
// compare-and-swap mode conditionally on the version it judged: a lock that
// changed hands meanwhile is left alone, the error wrapping
// backend.ErrPreconditionFailed).
func Break(ctx context.Context, st *store.Store, opts *BreakOptions) (Record, error) {
	var o BreakOptions
	if opts != nil {
		o = *opts
	}
	a, err := judgeOnly(st, o.StaleAfter, 0, o.Logger)
	if err != nil {
		return Record{}, err
	}
	v, err := a.scan.scan(ctx)
	if err != nil {
		return Record{}, err
	}
	holder, err := a.holder(ctx, v)
	if err != nil {
		return Record{}, err
	}
	if holder == nil {
		return Record{}, fmt.Errorf("lock: break: no state lock to break: %w", backend.ErrNotFound)
	}
	vd := a.judge(holder, time.Now())
	takeable := vd.kind == vTake || vd.label == Watching && !holder.anomaly && holder.age >= a.window(holder)
	switch {
	case takeable:
	case holder.readable && (!o.Force || o.Holder != holder.rec.InstanceID):
		return Record{}, fmt.Errorf("lock: break: refusing to break a live lock unless forced with the holder's instance id %q (given %q): %w",
			holder.rec.InstanceID, o.Holder, a.heldError(holder, a.window(holder), 0))
	case !holder.readable && (!o.Force || o.Holder != ""):
		return Record{}, fmt.Errorf("lock: break: refusing to break it unless forced without a holder id (its holder cannot be read, so no holder id can be matched): %w",
			a.heldError(holder, a.window(holder), 0))
	}
	// The marker first: the holder learns it lost, the next acquisition
	// counts on from it.
	e, err := a.nextEpoch(ctx, v)
	if err != nil {
		return Record{}, err
	}
	if err := a.writeMarker(ctx, e, ""); err != nil {
		return Record{}, fmt.Errorf("lock: break: lock left in place: %w", err)
	}
	var do store.DeleteOptions
	if holder.kind == kindLock && a.st.ConditionalWrites() {
		do.IfVersion = holder.info.Version
	}
	if err := a.st.Delete(ctx, holder.name, do); err != nil {
		if errors.Is(err, backend.ErrPreconditionFailed) {
			return Record{}, fmt.Errorf("lock: break: the lock changed since it was inspected; inspect it again: %w", err)
		}
		return Record{}, fmt.Errorf("lock: break: %w", err)
	}
	if holder.kind == kindHeld {
		_ = a.st.Delete(ctx, intentName(holder.acq), store.DeleteOptions{})
	}
	a.log.Warn("state lock broken", "object", holder.name, "holder", holder.rec.InstanceID, "epoch", holder.rec.Epoch, "marker", e)
	return holder.rec, nil
}

// encodeMarker is the sealed content of an epoch marker.
func encodeMarker(e uint64, instance, acq string) ([]byte, error) {
	return jsonMarshal(markerRecord{Epoch: e, InstanceID: instance, AcquisitionID: acq, WrittenAt: time.Now().UTC()})
}
