package lock

import (
	"context"
	"errors"
	"fmt"
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
	for conflicts < maxConflicts {
		start := time.Now()
		v, err := a.scan.scan(ctx)
		if err != nil {
			if ctx.Err() != nil || permanent(err) {
				return nil, err
			}
			lastErr = err
			conflicts++
			continue
		}
		d, err := a.decide(ctx, v, "")
		if err != nil {
			if ctx.Err() != nil || permanent(err) {
				return nil, err
			}
			lastErr = err
			conflicts++
			continue
		}
		// The lock object itself: ours (an earlier write of ours landed),
		// or judged like any other record.
		var landed *entry
		if e := v.lock; e != nil && d.kind != vRefuse {
			gone, err := a.scan.read(ctx, e)
			if err != nil {
				if ctx.Err() != nil {
					return nil, err
				}
				lastErr = err
				conflicts++
				continue
			}
			switch {
			case gone:
				v.lock = nil
			case e.readable && pending != nil && e.rec.AcquisitionID == pending.acq:
				landed = e
			case e.readable && a.mine[e.rec.AcquisitionID]:
				// An abandoned attempt of ours: ours to replace.
			default:
				vd := a.judge(e, time.Now())
				switch vd.kind {
				case vRefuse:
					d.kind, d.held, d.recheck = vRefuse, vd.held, vd.recheck
				case vWatch:
					if d.kind == vTake {
						d.kind, d.held, d.recheck = vWatch, vd.held, vd.recheck
					}
				case vTake:
					d.takeovers = append(d.takeovers, takenOver{e: e, reason: vd.reason, warn: vd.warn})
				}
			}
		}
		switch {
		case d.kind == vRefuse:
			if err := a.wait(ctx, d); err != nil {
				return nil, err
			}
			continue
		case d.kind == vWatch:
			if err := a.watch(ctx, d); err != nil {
				return nil, err
			}
			continue
		case d.backoff:
			if err := a.backoff(ctx, time.Since(start)); err != nil {
				return nil, fmt.Errorf("lock: acquire: %w", err)
			}
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
			e, err := a.nextEpoch(ctx, v)
			if err != nil {
				return nil, err
			}
			acq := newAcquisitionID()
			rec = a.record(acq, StateHeld, e)
			data, err := rec.encode()
			if err != nil {
				return nil, err
			}
			var po store.PutOptions
			if v.lock != nil {
				po.IfVersion = v.lock.info.Version
			} else {
				po.IfAbsent = true
			}
			sent = time.Now()
			rctx, cancel := a.request(ctx)
			info, err = a.st.Put(rctx, Name, data, po)
			cancel()
			if err != nil {
				switch {
				case ctx.Err() != nil:
					return nil, fmt.Errorf("lock: acquire: %w", ctx.Err())
				case permanent(err):
					return nil, fmt.Errorf("lock: acquire: %w", err)
				case !errors.Is(err, backend.ErrPreconditionFailed):
					a.log.Warn("state lock write failed; looking again", "err", err)
				}
				// Someone else wrote in between, or our write landed and
				// a retry reported the conflict: the next look tells.
				pending, lastErr = &pendingWrite{acq: acq, sent: sent}, err
				a.mine[acq] = true
				conflicts++
				continue
			}
			a.mine[acq] = true
		}
		pending = nil

		// The marker, then a second look: a higher marker means a whole
		// acquire–release cycle of another ran between our first look and
		// our write (or a break); a live claim means a claims-mode
		// instance on the same store.
		if err := a.writeMarker(ctx, rec.Epoch, rec.AcquisitionID); err != nil {
			a.abandon(ctx, info.Version, rec.Epoch, err)
			if permanent(err) && !errors.Is(err, backend.ErrPreconditionFailed) {
				return nil, fmt.Errorf("lock: acquire: %w", err)
			}
			lastErr = err
			conflicts++
			continue
		}
		v2, err := a.scan.scan(ctx)
		if err == nil && v2.maxMarker() > rec.Epoch {
			err = fmt.Errorf("epoch marker %d above ours (%d) appeared meanwhile", v2.maxMarker(), rec.Epoch)
		}
		if err == nil {
			var d2 decision
			if d2, err = a.decide(ctx, v2, ""); err == nil && (d2.kind == vRefuse || d2.backoff) {
				err = errors.New("a claims-mode instance is acquiring or holds the lock on this store")
			}
		}
		if err != nil {
			a.abandon(ctx, info.Version, rec.Epoch, err)
			if ctx.Err() != nil {
				return nil, fmt.Errorf("lock: acquire: %w", ctx.Err())
			}
			lastErr = err
			conflicts++
			if err := a.backoff(ctx, time.Since(start)); err != nil {
				return nil, fmt.Errorf("lock: acquire: %w", err)
			}
			continue
		}
		l := newLock(a, Name, rec, info.Version, sent, a.cleanupList(v2, rec, ""))
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
	if err := a.st.Delete(rctx, Name, store.DeleteOptions{IfVersion: version}); err != nil && !errors.Is(err, backend.ErrNotFound) && !errors.Is(err, backend.ErrPreconditionFailed) {
		a.log.Warn("state lock: could not remove our abandoned lock object; it goes stale on its own", "err", err)
	}
}

// cleanupList names what the new holder deletes once it holds the lock:
// epoch markers below its own, the legacy saved epoch, dead intents,
// stale held claims, and our own leftover claims other than keep.
func (a *acquirer) cleanupList(v view, rec Record, keep string) []string {
	var out []string
	for _, m := range v.markers {
		if m.epoch < rec.Epoch {
			out = append(out, m.name)
		}
	}
	if v.legacy != nil {
		out = append(out, legacyEpochName)
	}
	now := time.Now()
	for _, e := range v.intents {
		if a.mine[e.acq] || !a.intentLive(e, now) {
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
