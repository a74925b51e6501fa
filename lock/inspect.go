package lock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/lockhook"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/store"
)

// status, contender and the options are the administration's types
// (internal/lockhook), instantiated with the lock's record and mode.
type (
	status    = lockhook.Status[Record, Mode]
	contender = lockhook.Contender[Record]
)

// inspect reads the lock of st without changing anything, for `cairn-state
// lock status` (internal/lockadmin.Inspect), and judges it as an acquirer
// with another instance id would. An absent lock is a status with Present
// false, not an error.
func inspect(ctx context.Context, st *store.Store, o lockhook.InspectOptions) (status, error) {
	a, err := judgeOnly(st, o.StaleAfter, o.IntentWindow, nil)
	if err != nil {
		return status{}, fmt.Errorf("lock: inspect: %w", err)
	}
	v, err := a.scan.scan(ctx)
	if err != nil {
		return status{}, fmt.Errorf("lock: inspect: %w", err)
	}
	s := status{StaleAfter: a.o.StaleAfter, Epoch: v.maxMarker()}
	holder, err := a.holder(ctx, v)
	if err != nil {
		return status{}, fmt.Errorf("lock: inspect: %w", err)
	}
	if holder != nil && holder.kind == kindLock && holder.readable && holder.rec.counted() {
		s.Epoch = holder.rec.Epoch // what the next acquisition counts on from
	}
	if holder != nil && holder.released() {
		// A released lock object (compare-and-swap mode): nobody holds it.
		s.Object, s.Mode, s.Readable, s.Version, s.Record = holder.name, ModeCAS, true, holder.info.Version, holder.rec
		s.HeartbeatAge = holder.age
		holder = nil
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
		s.Stale = vd.kind == vTake && (vd.label == lockhook.Stale || vd.label == lockhook.UnreadableStale)
		if holder.readable {
			s.Record = holder.rec
		} else if holder.why != nil {
			s.Unreadable = holder.why.Error()
		}
		s.NextBoot = nextBoot(vd, a)
	} else if s.Readable {
		s.NextBoot = fmt.Sprintf("acquire it at once, at epoch %d: released by %q", s.Epoch+1, s.Record.InstanceID)
	} else {
		s.NextBoot = "acquire it at once: no instance holds the lock"
	}
	for _, e := range append(append(append([]*entry{}, v.helds...), v.intents...), v.unknown...) {
		if holder != nil && (e.name == holder.name || e.acq != "" && e.acq == holder.acq) {
			continue // the holder's own (an intent its clean-up has not deleted yet)
		}
		c := contender{Object: e.name, Age: e.age}
		switch e.kind {
		case kindIntent:
			if gone, err := a.scan.read(ctx, e); err != nil {
				return status{}, fmt.Errorf("lock: inspect: %w", err)
			} else if gone {
				continue
			}
			live, err := a.intentLive(ctx, e, now)
			if err != nil {
				return status{}, fmt.Errorf("lock: inspect: %w", err)
			}
			c.State, c.Live = stateIntent, live
		case kindHeld, kindUnknown:
			if e.kind == kindUnknown {
				e.read, e.why = true, fmt.Errorf("%w: a name the lock does not write", errMalformed)
			} else if gone, err := a.scan.read(ctx, e); err != nil {
				return status{}, fmt.Errorf("lock: inspect: %w", err)
			} else if gone {
				continue
			}
			if e.kind == kindHeld {
				c.State = stateHeld
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

// nextBoot says what a booting instance with another id would do.
func nextBoot(vd verdict, a *acquirer) string {
	switch vd.label {
	case lockhook.Stale, lockhook.Dead:
		return "take it over at once: " + vd.reason
	case lockhook.UnreadableStale:
		return "take it over with a warning: " + vd.reason
	case lockhook.Watching:
		if vd.held.Unreadable != "" {
			return fmt.Sprintf("watch it for up to %s, then take it over with a warning unless it is rewritten: it does not open with this process's keys and is old on the storage's clock, which nothing in it can confirm", vd.held.StaleAfter)
		}
		if vd.held.Duplicate {
			return fmt.Sprintf("watch it for up to %s before deciding (our instance id, from a PID space this process cannot probe)", a.o.missedHeartbeat(vd.held.Holder.HeartbeatInterval))
		}
		return fmt.Sprintf("watch it for up to %s before deciding (its age on the storage's clock and its holder's own heartbeat disagree)", vd.held.StaleAfter)
	case lockhook.Unreadable:
		return fmt.Sprintf("refuse to start until it is stale (in %s): it does not open with this process's keys", roundAge(vd.held.StaleIn))
	}
	return fmt.Sprintf("refuse to start until it is released or stale (in %s)", roundAge(vd.held.StaleIn))
}

// judgeOnly is an acquirer that judges but never holds (inspect, brk):
// an instance id no holder has, this process's PID space, and the default
// request timeout whatever the window (it has no lease to keep).
func judgeOnly(st *store.Store, staleAfter, intentWindow time.Duration, log *slog.Logger) (*acquirer, error) {
	if staleAfter <= 0 {
		staleAfter = defaultStaleAfter
	}
	o, err := Options{InstanceID: "\x00operator", StaleAfter: staleAfter, IntentWindow: intentWindow, RequestTimeout: defaultRequestTimeout, Logger: log}.withDefaults()
	if err != nil {
		return nil, err
	}
	hostname, _ := os.Hostname()
	in := storeadmin.Internal(st)
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

// breakerID is the instance id of the released record a break writes.
const breakerID = "(lock break)"

// brk breaks the lock of st for an operator (`cairn-state lock break`;
// internal/lockadmin.Break documents what it breaks and refuses).
func brk(ctx context.Context, st *store.Store, o lockhook.BreakOptions) (Record, error) {
	a, err := judgeOnly(st, o.StaleAfter, 0, o.Logger)
	if err != nil {
		return Record{}, fmt.Errorf("lock: break: %w", err)
	}
	v, err := a.scan.scan(ctx)
	if err != nil {
		return Record{}, fmt.Errorf("lock: break: %w", err)
	}
	holder, err := a.holder(ctx, v)
	if err != nil {
		return Record{}, fmt.Errorf("lock: break: %w", err)
	}
	if holder == nil || holder.released() {
		return Record{}, fmt.Errorf("lock: break: no state lock to break: %w", backend.ErrNotFound)
	}
	// Only what a boot would take at once: a lock a boot would watch (the
	// storage's clock says old, nothing confirms it) is refused like a
	// live one (lock/model -DBREAK_WATCHING).
	vd := a.judge(holder, time.Now())
	switch {
	case vd.kind == vTake:
	case holder.readable && (!o.Force || o.Holder != holder.rec.InstanceID):
		return Record{}, fmt.Errorf("lock: break: refusing to break a live lock unless forced with the holder's instance id %q (given %q): %w",
			holder.rec.InstanceID, o.Holder, a.heldError(holder, a.window(holder), 0))
	case !holder.readable && (!o.Force || o.Holder != ""):
		return Record{}, fmt.Errorf("lock: break: refusing to break it unless forced without a holder id (its holder cannot be read, so no holder id can be matched): %w",
			a.heldError(holder, a.window(holder), 0))
	}
	if holder.kind == kindLock {
		return a.breakCAS(ctx, holder, v)
	}
	// The marker first: the holder learns it lost, the next acquisition
	// counts on from it.
	e, err := a.nextEpoch(v)
	if err != nil {
		return Record{}, fmt.Errorf("lock: break: %w", err)
	}
	if err := a.writeMarker(ctx, e, ""); err != nil {
		return Record{}, fmt.Errorf("lock: break: lock left in place: %w", err)
	}
	if err := deleteMany(ctx, a.st, a.log, holder.name, intentName(holder.acq)); err != nil {
		return Record{}, fmt.Errorf("lock: break: %w", err)
	}
	a.log.Warn("state lock broken", "object", holder.name, "holder", holder.rec.InstanceID, "epoch", holder.rec.Epoch, "marker", e)
	return holder.rec, nil
}

// breakCAS writes a released record in place of the holder's lock object,
// conditionally on the version judged (docs/adr/0066): the holder's next
// heartbeat fails its condition and reads that it lost; the next
// acquisition takes the record at once and counts on from its epoch — the
// holder's, or, for a lock object that cannot be counted on from (another
// key, garbage, a root), the highest marker's.
func (a *acquirer) breakCAS(ctx context.Context, holder *entry, v view) (Record, error) {
	epoch, ceiling := holder.rec.Epoch, holder.rec.Ceiling
	if !holder.readable || !holder.rec.counted() {
		epoch = max(v.maxMarker(), 1)
		ceiling = epoch
	}
	rec := a.record(newAcquisitionID(), stateReleased, epoch, time.Now())
	rec.InstanceID, rec.Mode, rec.Ceiling = breakerID, ModeCAS, ceiling
	data, err := rec.encode()
	if err != nil {
		return Record{}, fmt.Errorf("lock: break: %w", err)
	}
	if _, err := a.st.Put(ctx, lockName, data, store.PutOptions{IfVersion: holder.info.Version}); err != nil {
		if errors.Is(err, backend.ErrPreconditionFailed) {
			return Record{}, fmt.Errorf("lock: break: the lock changed since it was inspected; inspect it again: %w", err)
		}
		return Record{}, fmt.Errorf("lock: break: %w", err)
	}
	a.log.Warn("state lock broken: released in its holder's place", "holder", holder.rec.InstanceID, "epoch", holder.rec.Epoch, "released_epoch", epoch)
	return holder.rec, nil
}

func init() {
	lockhook.Register(&lockhook.Ops[*store.Store, Record, Mode, *Lock]{
		Inspect: inspect, Break: brk, Owns: owns,
		Guards: (*Lock).guards, Deadline: (*Lock).deadline,
	})
}

// encodeMarker is the sealed content of an epoch marker.
func encodeMarker(e uint64, instance, acq string) ([]byte, error) {
	return jsonMarshal(markerRecord{Epoch: e, InstanceID: instance, AcquisitionID: acq, WrittenAt: time.Now().UTC()})
}
