package lock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/envelope"
	"github.com/cairnhq/state/store"
)

// observation is what one look at the lock object found.
type observation struct {
	present  bool
	readable bool
	rec      Record     // when readable
	info     store.Info // when present
	why      error      // when present but unreadable
	// age is how long ago the object was last written, on the storage's
	// clock (zero when absent, never negative).
	age time.Duration
}

// observe reads the lock object and, withAge, the storage clock. An object
// that exists but does not open or decode (a wrong key after an identity
// rotation, garbage) is reported unreadable rather than as an error.
func observe(ctx context.Context, st *store.Store, withAge bool) (observation, error) {
	var obs observation
	obj, err := readObject(ctx, st, Name)
	if err != nil {
		return obs, err
	}
	if !obj.present {
		return obs, nil
	}
	obs.present, obs.info, obs.why = true, obj.info, obj.why
	if obj.why == nil {
		rec, derr := decodeRecord(obj.data)
		if derr != nil {
			obs.why = fmt.Errorf("lock object %s: %w", Name, derr)
		} else {
			obs.readable, obs.rec = true, rec
		}
	}
	if !withAge {
		return obs, nil
	}
	now, err := st.Now(ctx)
	if err != nil {
		return obs, fmt.Errorf("lock: %w", err)
	}
	if age := now.Sub(obs.info.ModTime); age > 0 {
		obs.age = age
	}
	return obs, nil
}

// object is one read of a reserved object.
type object struct {
	present bool
	data    []byte     // the opened contents, when present and why is nil
	info    store.Info // when present
	why     error      // when present but it does not open
}

// readObject reads and opens one reserved object. An object that exists
// but does not open is reported with why set rather than as an error. The
// envelope's errors say so directly; any other failed read (a sealer
// without typed errors, or a failing storage, whose errors are not typed
// either) is retried once, and the object's existence confirmed with Stat,
// before it counts as not opening.
func readObject(ctx context.Context, st *store.Store, name string) (object, error) {
	var obj object
	data, info, err := st.Get(ctx, name)
	if err != nil && !errors.Is(err, backend.ErrNotFound) && !doesNotOpen(err) && ctx.Err() == nil {
		data, info, err = st.Get(ctx, name)
	}
	switch {
	case errors.Is(err, backend.ErrNotFound):
		return obj, nil
	case err != nil && ctx.Err() != nil:
		return obj, err
	case err != nil:
		sinfo, serr := st.Stat(ctx, name)
		if errors.Is(serr, backend.ErrNotFound) {
			return obj, nil
		}
		if serr != nil {
			return obj, fmt.Errorf("lock: read %s: %w (stat: %v)", name, err, serr)
		}
		obj.present, obj.info, obj.why = true, sinfo, err
	default:
		obj.present, obj.info, obj.data = true, info, data
	}
	return obj, nil
}

func (o observation) staleIn(staleAfter time.Duration) time.Duration {
	return max(staleAfter-o.age, 0)
}

// window is the stale window to judge the observed lock by: the longer of
// the judge's own and the one its holder recorded (older records have
// none), so that a short window never cuts a long-window holder short.
func (o observation) window(own time.Duration) time.Duration {
	if o.readable {
		return max(own, o.rec.StaleAfter)
	}
	return own
}

// held is the refusal of the observed lock, judged with window: naming its
// holder, or saying why it could not be read.
func (o observation) held(window time.Duration, refusal string) *HeldError {
	h := &HeldError{Holder: o.rec, HeartbeatAge: o.age, StaleAfter: window, StaleIn: o.staleIn(window), Refusal: refusal}
	if !o.readable && o.why != nil {
		h.Unreadable = o.why.Error()
	}
	return h
}

// doesNotOpen reports errors that say the object itself is bad, as opposed
// to the storage failing to deliver it.
func doesNotOpen(err error) bool {
	for _, target := range []error{
		envelope.ErrNoIdentity, envelope.ErrTampered, envelope.ErrUnauthenticated,
		envelope.ErrNotEnvelope, envelope.ErrTruncated, envelope.ErrNameMismatch,
		envelope.ErrTooLarge, store.ErrTooLarge,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
