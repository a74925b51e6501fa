package lock

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/store"
)

// entry is one object found under listPrefix.
type entry struct {
	name  string
	kind  kind
	acq   string // a claim's acquisition id, from its name
	epoch uint64 // a marker's epoch, from its name
	info  store.Info

	// Filled by read, for sealed records (the lock, claims); gone when
	// the read found it deleted since the listing.
	gone     bool
	read     bool
	readable bool
	rec      Record
	why      error // when read and not readable

	// gen is the manifest generation the record was sealed under (zero
	// when not read, or not a connected store's).
	gen uint64

	// age is how long ago the object was written, on the storage's clock
	// (zero when anomalous); anomaly means its modification time is ahead
	// of the storage's now by more than the clock's resolution.
	age     time.Duration
	anomaly bool
}

// released reports whether e is a released lock object (compare-and-swap
// mode, docs/adr/0066). Only read fills rec, and only with readable; it
// refuses a claim whose record is not an intent's or a held one; and
// nothing reads an entry of a name the lock does not write. So a
// released record is a readable lock object's, on an entry read once
// (its callers' are: a second read that fails to open keeps the first
// one's record).
func (e *entry) released() bool { return e.rec.released() }

// view is what one look at the lock's objects found.
type view struct {
	lock    *entry   // .lock, compare-and-swap mode
	intents []*entry // claims of acquisitions in progress
	helds   []*entry // confirmed claims
	markers []*entry // epoch markers, ascending
	unknown []*entry // under .lock.d/ but not a name the lock writes
}

// maxMarker is the highest epoch marker's number (0 when none).
func (v view) maxMarker() uint64 {
	if len(v.markers) == 0 {
		return 0
	}
	return v.markers[len(v.markers)-1].epoch
}

// records are the entries that can hold the lock: the lock object and the
// held claims.
func (v view) records() []*entry {
	var out []*entry
	if v.lock != nil {
		out = append(out, v.lock)
	}
	return append(out, v.helds...)
}

// scanner reads the lock's objects of one store.
type scanner struct {
	st *store.Store // internal view
	// timeout, when set, bounds each request (the holder's: RequestTimeout
	// per request, not per heartbeat).
	timeout time.Duration
}

// request bounds one request by the scanner's timeout, if it has one.
func (s scanner) request(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.timeout)
}

// scan lists every object under listPrefix (one listing). It reads nothing:
// read does that for the entries that need their content. A listing error
// is an error, never "nothing there".
func (s scanner) scan(ctx context.Context) (view, error) { return s.scanUnder(ctx, listPrefix) }

// markers lists the epoch markers alone (one listing): a view of them
// (markers, ascending).
func (s scanner) markers(ctx context.Context) (view, error) { return s.scanUnder(ctx, markerPrefix) }

// scanUnder is scan of the lock's objects whose names start with prefix.
func (s scanner) scanUnder(ctx context.Context, prefix string) (view, error) {
	var v view
	var noClock []*entry
	ctx, cancel := s.request(ctx)
	defer cancel()
	err := s.st.List(ctx, prefix, func(info store.Info) error {
		k, acq, epoch := parseName(info.Name)
		e := &entry{name: info.Name, kind: k, acq: acq, epoch: epoch, info: info}
		if info.Now.IsZero() {
			noClock = append(noClock, e)
		} else {
			e.setAge(info.Now)
		}
		switch k {
		case kindLock:
			v.lock = e
		case kindIntent:
			v.intents = append(v.intents, e)
		case kindHeld:
			v.helds = append(v.helds, e)
		case kindMarker:
			v.markers = append(v.markers, e)
		case kindUnknown:
			v.unknown = append(v.unknown, e)
		}
		return nil
	})
	if err != nil {
		return view{}, fmt.Errorf("list %s*: %w", prefix, err)
	}
	if len(noClock) > 0 {
		// A backend that reports no response time: one look at its clock.
		now, err := storeadmin.Now(ctx, s.st)
		if err != nil {
			return view{}, err
		}
		for _, e := range noClock {
			e.setAge(now)
		}
	}
	sort.Slice(v.markers, func(i, j int) bool { return v.markers[i].epoch < v.markers[j].epoch })
	return v, nil
}

// ageIntentsAt judges the intents' ages against floor, a storage time from
// before the listing began (the answer to our own write just before it),
// instead of the listing page's time: a slot is read some time before its
// page is answered, and an age taken late could call an intent dead too
// early (lock/model -DJUDGE_LATE). A zero floor keeps the listing's ages.
func (v view) ageIntentsAt(floor time.Time) {
	if floor.IsZero() {
		return
	}
	for _, e := range v.intents {
		// An intent written after floor (a racing acquirer) gets age 0,
		// or an unknown age — live — if it is ahead by more than the
		// clock's resolution.
		e.setAge(floor)
	}
}

// setAge judges the entry's age against the storage's now.
func (e *entry) setAge(now time.Time) {
	age := now.Sub(e.info.ModTime)
	switch {
	case age < -clockResolution:
		e.age, e.anomaly = 0, true
	case age < 0:
		e.age, e.anomaly = 0, false
	default:
		e.age, e.anomaly = age, false
	}
}

// read opens a sealed entry (the lock object or a claim) and fills its
// record, or why it does not open. An object that exists but does not open
// (store.ErrUnreadable: another key, garbage, a corrupt object file, too
// large) is unreadable, not an error; an object that vanished since the
// listing reports gone. Its age is refreshed from the read's answer.
func (s scanner) read(ctx context.Context, e *entry) (gone bool, err error) {
	ctx, cancel := s.request(ctx)
	defer cancel()
	obj, err := storeadmin.GetObject(ctx, s.st, e.name)
	data, info := obj.Data, obj.Info
	switch {
	case errors.Is(err, backend.ErrNotFound):
		e.gone = true
		return true, nil
	case errors.Is(err, store.ErrRolledBack):
		// Sealed under a newer generation than the manifest's: the
		// manifest was put back, which is the store's failure to report,
		// not a lock someone else holds (a released lock object outlives
		// every holder, docs/adr/0066).
		return false, fmt.Errorf("read %s: %w", e.name, err)
	case errors.Is(err, store.ErrUnreadable):
		// The content is unknown, but the object is there; its listing
		// gives its version and age.
		e.read, e.readable, e.why = true, false, unwrapStore(err)
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read %s: %w", e.name, err)
	}
	e.info, e.gen = info, obj.Opened.Stamp.Generation
	if !info.Now.IsZero() {
		e.setAge(info.Now)
	}
	e.read = true
	rec, derr := decodeRecord(data)
	if derr != nil {
		e.why = derr
		return false, nil
	}
	// A claim whose content disagrees with its name is not trusted.
	switch {
	case e.kind == kindIntent && (rec.AcquisitionID != e.acq || rec.State != stateIntent),
		e.kind == kindHeld && (rec.AcquisitionID != e.acq || !rec.held()):
		e.why = fmt.Errorf("%w: its content (acquisition %s, state %q) does not match its name", errMalformed, rec.AcquisitionID, rec.State)
		return false, nil
	case e.kind == kindLock && rec.State == stateIntent:
		e.why = fmt.Errorf("%w: the lock object holds an intent", errMalformed)
		return false, nil
	}
	e.readable, e.rec = true, rec
	return false, nil
}

// readLock reads the lock object of compare-and-swap mode (one GET): nil
// when there is none. One that does not open is stat'ed for its version
// and age, which a read that fails to open does not return.
func (s scanner) readLock(ctx context.Context) (*entry, error) {
	e := &entry{name: lockName, kind: kindLock}
	gone, err := s.read(ctx, e)
	if err != nil || gone {
		return nil, err
	}
	rctx, cancel := s.request(ctx)
	defer cancel()
	if e.info.Version == "" {
		info, err := s.st.Stat(rctx, lockName)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil, nil
		case err != nil:
			return nil, fmt.Errorf("stat %s: %w", lockName, err)
		}
		e.info = info
	}
	now := e.info.Now
	if now.IsZero() {
		// A backend that reports no response time: one look at its clock.
		if now, err = storeadmin.Now(rctx, s.st); err != nil {
			return nil, err
		}
	}
	e.setAge(now)
	return e, nil
}

// unwrapStore keeps the reason of a store error for messages, without the
// store's own "store: get NAME:" prefix (the lock names the object itself).
func unwrapStore(err error) error {
	if u, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range u.Unwrap() {
			if e != store.ErrUnreadable {
				return e
			}
		}
	}
	return err
}
