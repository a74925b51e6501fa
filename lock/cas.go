package lock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/driver"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/store"
)

// epochBlock is how many epochs one reservation marker covers in
// compare-and-swap mode (docs/adr/0066): the lock object carries its
// block's ceiling, and only an acquisition that passes it writes a marker,
// the next block's. Markers are multiples of it. A thousand acquisitions
// per extra PUT (and a DELETE of the old marker); an epoch jumps by at most
// a block when the lock object is lost, unreadable or created again.
const epochBlock = 1000

// nextBlock is the ceiling of the block above epoch c: the next multiple
// of epochBlock, or the largest epoch there is.
func nextBlock(c uint64) uint64 {
	if c > math.MaxUint64-epochBlock {
		return math.MaxUint64
	}
	return (c/epochBlock + 1) * epochBlock
}

// pendingWrite is a lock write whose answer was not a success: it may
// still have landed.
type pendingWrite struct {
	acq     string
	sent    time.Time
	create  bool     // an if-absent create: its second look is still due
	cleanup []string // the markers its reservation left below it
}

// acquireCAS is compare-and-swap mode (docs/adr/0066): read the lock
// object, judge it, and write it conditionally on the version read; its
// epoch is the last one plus one within the reserved block. A lock object
// that is missing (a new store, one deleted out of band), unreadable or
// written by a create not yet confirmed counts on from the markers
// instead, and a create looks at them again before its fence opens.
func (a *acquirer) acquireCAS(ctx context.Context) (*Lock, error) {
	a.mine = map[string]bool{}
	var (
		lastErr   error
		conflicts int
		pending   *pendingWrite
	)
	// retry counts a failed step and says whether to start over: not when
	// the context ended or the error is one no retry mends.
	retry := func(err error) error {
		if ctx.Err() != nil {
			return fmt.Errorf("lock: acquire: %w", context.Cause(ctx))
		}
		if permanent(err) {
			return fmt.Errorf("lock: acquire: %w", err)
		}
		lastErr = err
		conflicts++
		return nil
	}
	for conflicts < maxConflicts {
		start := time.Now()
		cur, err := a.scan.readLock(ctx)
		if err != nil {
			if err := retry(err); err != nil {
				return nil, err
			}
			continue
		}
		var (
			rec       Record
			info      store.Info
			sent      time.Time
			create    bool
			cleanup   []string
			takeovers []takenOver
		)
		if p := pending; p != nil && cur != nil && cur.readable && cur.rec.AcquisitionID == p.acq && cur.rec.held() {
			// A 412 or no answer, and yet our write landed.
			rec, info, sent, create, cleanup = cur.rec, cur.info, p.sent, p.create, p.cleanup
			a.log.Info("state lock: our earlier write had landed", "epoch", rec.Epoch)
		} else {
			d := decision{kind: vTake}
			switch {
			case cur == nil, cur.released():
				// Nobody holds it: take it at once.
			case cur.readable && a.mine[cur.rec.AcquisitionID]:
				// An attempt of ours whose answer came too late: ours to
				// replace.
			default:
				d.add(cur, a.judge(cur, time.Now()))
			}
			if goAhead, err := a.dispatch(ctx, d, time.Since(start)); err != nil {
				return nil, err
			} else if !goAhead {
				continue
			}
			takeovers = d.takeovers
			acq := newAcquisitionID()
			a.mine[acq] = true
			e, ceiling, below, err := a.nextCAS(ctx, cur, acq)
			if err != nil {
				if err := retry(err); err != nil {
					return nil, err
				}
				continue
			}
			create, cleanup = cur == nil, below
			sent = time.Now()
			rec = a.record(acq, stateHeld, e, sent)
			rec.Ceiling, rec.Root = ceiling, create
			po := store.PutOptions{IfAbsent: create}
			if !create {
				po.IfVersion = cur.info.Version
			}
			if info, err = a.writeLock(ctx, rec, po); err != nil {
				if !errors.Is(err, backend.ErrPreconditionFailed) && !permanent(err) && ctx.Err() == nil {
					a.log.Warn("state lock write failed; looking again", "err", err)
				}
				// Someone else wrote in between, or our write landed and
				// a retry reported the conflict: the next look tells.
				pending = &pendingWrite{acq: acq, sent: sent, create: create, cleanup: cleanup}
				if err := retry(err); err != nil {
					return nil, err
				}
				continue
			}
		}
		pending = nil
		if create {
			// The second look of a create: a marker above ours means an
			// acquisition that found no lock object either reserved
			// after us, and may have held and lost its lock object before
			// ours landed (lock/model -DNO_ROOT_POSTCHECK).
			mv, err := a.scan.markers(ctx)
			if top := mv.maxMarker(); err == nil && top > rec.Ceiling {
				a.abandon(ctx, rec, info.Version, top)
				err = fmt.Errorf("epoch marker %d above our block's (%d) appeared meanwhile", top, rec.Ceiling)
			}
			if err == nil {
				// Confirmed: written again, it is no root any more, and a
				// crash of ours from here on leaves a record the next
				// acquisition counts on from (the model's first heartbeat,
				// sent before the fence opens). Its send is the lease's.
				conf := rec
				conf.Root = false
				csent := time.Now()
				conf.Heartbeat = csent.UTC()
				var cinfo store.Info
				if cinfo, err = a.writeLock(ctx, conf, store.PutOptions{IfVersion: info.Version}); err == nil {
					rec, info, sent = conf, cinfo, csent
				} else {
					err = fmt.Errorf("confirming the lock object we created: %w", err)
				}
			}
			if err != nil {
				if err := retry(err); err != nil {
					return nil, err
				}
				if err := a.backoff(ctx, time.Since(start)); err != nil {
					return nil, fmt.Errorf("lock: acquire: %w", err)
				}
				continue
			}
		}
		l := newLock(a, lockName, rec, info.Version, sent, cleanup)
		attrs := []any{"epoch", rec.Epoch, "mode", a.mode}
		a.logTakeovers(takeovers, attrs...)
		a.log.Info("state lock acquired", attrs...)
		return l, nil
	}
	return nil, fmt.Errorf("lock: acquire: gave up after %d attempts: %w", maxConflicts, lastErr)
}

// nextCAS is the epoch and ceiling of an acquisition that replaces cur
// (nil: there is no lock object), and the markers it leaves below its
// block. Counted on from cur, within its block, with no request; past the
// block's end, after reserving the next block; and from the markers for a
// missing, unreadable or root lock object. A lock object sealed under an
// older generation of the manifest than the store's (the first
// acquisition after a rekey) ends its block at once: the next block's
// marker is then sealed to the store's keys of now, and the old one, the
// retired keys', is deleted — the lock re-seals its own objects, which
// rekey skips.
func (a *acquirer) nextCAS(ctx context.Context, cur *entry, acq string) (e, ceiling uint64, below []string, err error) {
	if cur == nil || !cur.readable || !cur.rec.counted() {
		return a.reserveAbove(ctx, acq)
	}
	if cur.rec.Epoch == math.MaxUint64 {
		return 0, 0, nil, epochExhausted(lockName, cur.rec.Epoch)
	}
	e, ceiling = cur.rec.Epoch+1, cur.rec.Ceiling
	if m, ok := storeadmin.Manifest(a.st); ok && cur.gen < m.Generation {
		e = ceiling + 1
	}
	if e <= ceiling {
		return e, ceiling, nil, nil
	}
	next := nextBlock(ceiling)
	switch err := a.writeMarker(ctx, next, acq); {
	case err == nil:
		return e, next, []string{markerName(ceiling)}, nil
	case errors.Is(err, backend.ErrPreconditionFailed):
		// Another acquisition owns that block (lock/model
		// -DBOUNDARY_SHARED_BLOCK): above the highest marker, then.
		return a.reserveAbove(ctx, acq)
	default:
		return 0, 0, nil, err
	}
}

// reserveAbove lists the markers and reserves the block above the highest:
// its first epoch and its ceiling, and the markers below it. A block is
// reserved only by creating its marker (if-absent): one another
// acquisition created is its, and the listing is done again (lock/model
// -DROOT_SHARED_BLOCK).
func (a *acquirer) reserveAbove(ctx context.Context, acq string) (e, ceiling uint64, below []string, err error) {
	for range maxConflicts {
		mv, err := a.scan.markers(ctx)
		if err != nil {
			return 0, 0, nil, err
		}
		top := mv.maxMarker()
		if top == math.MaxUint64 {
			return 0, 0, nil, epochExhausted(markerName(top), top)
		}
		ceiling = nextBlock(top)
		switch err := a.writeMarker(ctx, ceiling, acq); {
		case err == nil:
			for _, m := range mv.markers {
				below = append(below, m.name)
			}
			return top + 1, ceiling, below, nil
		case !errors.Is(err, backend.ErrPreconditionFailed):
			return 0, 0, nil, err
		}
	}
	return 0, 0, nil, fmt.Errorf("reserving an epoch block: other acquisitions kept reserving the one above the highest marker: %w", backend.ErrPreconditionFailed)
}

// writeLock writes the lock object under the request timeout.
func (a *acquirer) writeLock(ctx context.Context, rec Record, po store.PutOptions) (store.Info, error) {
	data, err := rec.encode()
	if err != nil {
		return store.Info{}, err
	}
	rctx, cancel := a.request(ctx)
	defer cancel()
	return a.st.Put(rctx, lockName, data, po)
}

// abandon gives up a create whose second look found a marker above its
// block: a released record with that marker as its epoch and ceiling
// (if-version ours), so that the next acquisition counts on from above
// it. If it fails, our root record stays and is counted from the markers
// anyway.
func (a *acquirer) abandon(ctx context.Context, rec Record, version string, top uint64) {
	a.log.Warn("state lock: abandoning our acquisition and starting over", "epoch", rec.Epoch, "marker", top)
	rec.State, rec.Epoch, rec.Ceiling, rec.Root = stateReleased, top, top, false
	rec.Heartbeat = time.Now().UTC()
	if _, err := a.writeLock(context.WithoutCancel(ctx), rec, store.PutOptions{IfVersion: version}); err != nil {
		a.log.Warn("state lock: could not release our abandoned lock object; it is counted from the markers anyway", "err", err)
	}
}

// cleanupList names what the new holder of a claims lock deletes at its
// release (docs/adr/0067): epoch markers below its own, dead intents,
// stale held claims, and our own leftover claims other than keep.
func (a *acquirer) cleanupList(v view, rec Record, keep string) []string {
	var out []string
	for _, m := range v.markers {
		if m.epoch < rec.Epoch {
			out = append(out, m.name)
		}
	}
	now := time.Now()
	for _, e := range v.intents {
		if e.acq != rec.AcquisitionID && (a.mine[e.acq] || a.intentDead(e, now)) {
			out = append(out, e.name)
		}
	}
	for _, e := range v.helds {
		if e.name == keep {
			continue
		}
		// A held claim that is ours or judged dead goes with its intent,
		// which its holder kept until a release it never made.
		if a.mine[e.acq] {
			out = append(out, e.name, intentName(e.acq))
			continue
		}
		if e.read {
			if vd := a.judge(e, now); vd.kind == vTake {
				out = append(out, e.name, intentName(e.acq))
			}
		}
	}
	return out
}

// deleteMany deletes the lock's objects names in one request where the
// backend can (driver.DeleteMany), bounded by ctx, and returns what
// failed (an object already gone is not a failure); the callers that
// clean up ignore it (a leftover is deleted at a later look, or judged
// like any other object). It is the one delete of lists of the lock's
// objects.
func deleteMany(ctx context.Context, st *store.Store, log *slog.Logger, names ...string) error {
	if len(names) == 0 {
		return nil
	}
	keys := make([]string, 0, len(names))
	for _, name := range names {
		key, err := storeadmin.Key(st, name)
		if err != nil {
			return err
		}
		keys = append(keys, key)
	}
	err := driver.DeleteMany(ctx, storeadmin.Backend(st), keys)
	if err != nil {
		log.Debug("state lock: could not delete lock objects", "objects", names, "err", err)
	}
	return err
}
