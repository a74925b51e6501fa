package lock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/store"
)

// pendingWrite is a lock write whose answer was not a success: it may
// still have landed.
type pendingWrite struct {
	acq  string
	sent time.Time
}

// acquireCAS is compare-and-swap mode (docs/adr/0019): list, read, judge,
// write the lock conditionally, write the epoch marker, list again.
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
		v, err := a.scan.scan(ctx)
		if err != nil {
			if err := retry(err); err != nil {
				return nil, err
			}
			continue
		}
		var pendingAcq string
		if pending != nil {
			pendingAcq = pending.acq
		}
		d, landed, err := a.decide(ctx, v, "", pendingAcq)
		if err != nil {
			if err := retry(err); err != nil {
				return nil, err
			}
			continue
		}
		if goAhead, err := a.dispatch(ctx, d, time.Since(start)); err != nil {
			return nil, err
		} else if !goAhead {
			continue
		}

		var (
			rec  Record
			info store.Info
			sent time.Time
		)
		if landed != nil {
			rec, info, sent = landed.rec, landed.info, pending.sent
			a.log.Info("state lock: our earlier write had landed", "epoch", rec.Epoch)
		} else {
			e, err := a.nextEpoch(v)
			if err != nil {
				return nil, fmt.Errorf("lock: acquire: %w", err)
			}
			acq := newAcquisitionID()
			sent = time.Now()
			rec = a.record(acq, stateHeld, e, sent)
			data, err := rec.encode()
			if err != nil {
				return nil, fmt.Errorf("lock: acquire: %w", err)
			}
			var po store.PutOptions
			if v.lock != nil && !v.lock.gone {
				po.IfVersion = v.lock.info.Version
			} else {
				po.IfAbsent = true
			}
			rctx, cancel := a.request(ctx)
			info, err = a.st.Put(rctx, lockName, data, po)
			cancel()
			a.mine[acq] = true
			if err != nil {
				if !errors.Is(err, backend.ErrPreconditionFailed) && !permanent(err) && ctx.Err() == nil {
					a.log.Warn("state lock write failed; looking again", "err", err)
				}
				// Someone else wrote in between, or our write landed and
				// a retry reported the conflict: the next look tells.
				pending = &pendingWrite{acq: acq, sent: sent}
				if err := retry(err); err != nil {
					return nil, err
				}
				continue
			}
		}
		pending = nil

		// The marker, then a second look: a higher marker means a whole
		// acquire–release cycle of another ran between our first look and
		// our write (or a break); a live or watched claim means a
		// claims-mode instance on the same store.
		if err := a.writeMarker(ctx, rec.Epoch, rec.AcquisitionID); err != nil {
			a.abandon(ctx, info.Version, rec.Epoch, err)
			if errors.Is(err, backend.ErrPreconditionFailed) {
				err = fmt.Errorf("%w (another acquisition confirmed this epoch)", err)
			}
			if err := retry(err); err != nil {
				return nil, err
			}
			continue
		}
		v2, err := a.scan.scan(ctx)
		if err == nil && v2.maxMarker() > rec.Epoch {
			err = fmt.Errorf("epoch marker %d above ours (%d) appeared meanwhile", v2.maxMarker(), rec.Epoch)
		}
		if err == nil {
			// The lock object is ours, just written: the claims are what
			// this look judges.
			var d2 decision
			post := v2
			post.lock = nil
			if d2, _, err = a.decide(ctx, post, "", ""); err == nil && (d2.kind != vTake || d2.backoff) {
				err = errors.New("a claims-mode instance is acquiring or holds the lock on this store")
			}
		}
		if err != nil {
			a.abandon(ctx, info.Version, rec.Epoch, err)
			if err := retry(err); err != nil {
				return nil, err
			}
			if err := a.backoff(ctx, time.Since(start)); err != nil {
				return nil, fmt.Errorf("lock: acquire: %w", err)
			}
			continue
		}
		l := newLock(a, lockName, rec, info.Version, sent, a.cleanupList(v2, rec, ""))
		attrs := []any{"epoch", rec.Epoch, "mode", a.mode}
		a.logTakeovers(d.takeovers, attrs...)
		a.log.Info("state lock acquired", attrs...)
		return l, nil
	}
	return nil, fmt.Errorf("lock: acquire: gave up after %d attempts: %w", maxConflicts, lastErr)
}

// abandon removes a lock object we wrote but may not hold.
func (a *acquirer) abandon(ctx context.Context, version string, epoch uint64, why error) {
	a.log.Warn("state lock: abandoning our acquisition and starting over", "epoch", epoch, "why", why)
	rctx, cancel := a.request(context.WithoutCancel(ctx))
	defer cancel()
	if err := a.st.Delete(rctx, lockName, store.DeleteOptions{IfVersion: version}); err != nil && !errors.Is(err, backend.ErrNotFound) && !errors.Is(err, backend.ErrPreconditionFailed) {
		a.log.Warn("state lock: could not remove our abandoned lock object; it goes stale on its own", "err", err)
	}
}

// cleanupList names what the new holder deletes once it holds the lock:
// epoch markers below its own, dead intents, stale held claims, and our
// own leftover claims other than keep.
func (a *acquirer) cleanupList(v view, rec Record, keep string) []string {
	var out []string
	for _, m := range v.markers {
		if m.epoch < rec.Epoch {
			out = append(out, m.name)
		}
	}
	now := time.Now()
	for _, e := range v.intents {
		if a.mine[e.acq] || a.intentDead(e, now) {
			out = append(out, e.name)
		}
	}
	for _, e := range v.helds {
		if e.name == keep {
			continue
		}
		if a.mine[e.acq] {
			out = append(out, e.name)
			continue
		}
		if e.read {
			if vd := a.judge(e, now); vd.kind == vTake {
				out = append(out, e.name)
			}
		}
	}
	return out
}

// deleteAll deletes names, each request bounded by ctx, and returns the
// first failure (an object already gone is not one); the callers that
// clean up ignore it (a leftover is deleted at a later look, or judged like
// any other object). It is the one delete of lists of the lock's objects.
func deleteAll(ctx context.Context, st *store.Store, log *slog.Logger, names ...string) error {
	var first error
	for _, name := range names {
		if err := st.Delete(ctx, name, store.DeleteOptions{}); err != nil && !errors.Is(err, backend.ErrNotFound) {
			log.Debug("state lock: could not delete a lock object", "object", name, "err", err)
			if first == nil {
				first = err
			}
		}
	}
	return first
}
