package lock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairnhq/state/store"
)

// acquireClaims is claims mode (docs/adr/0020): write an intent of our own,
// list everybody's, and confirm only if no other live claim is in sight —
// all before the intent's deadline.
func (a *acquirer) acquireClaims(ctx context.Context) (*Lock, error) {
	a.mine = map[string]bool{}
	var (
		lastErr   error
		conflicts int
	)
	for conflicts < maxConflicts {
		acq := newAcquisitionID()
		a.mine[acq] = true
		start := time.Now()
		deadline := start.Add(a.o.intentDeadline())
		l, d, confirmTried, err := a.attemptClaim(ctx, acq, start, deadline)
		if l != nil {
			return l, nil
		}
		a.dropAttempt(ctx, acq, confirmTried)
		switch {
		case ctx.Err() != nil:
			if d.held != nil {
				return nil, waitErr(ctx, d.held)
			}
			return nil, fmt.Errorf("lock: acquire: %w", context.Cause(ctx))
		case err != nil && permanent(err):
			return nil, fmt.Errorf("lock: acquire: %w", err)
		case err != nil:
			a.log.Warn("state lock: acquisition attempt failed; starting over", "err", err)
			lastErr = err
			conflicts++
		default:
			if _, err := a.dispatch(ctx, d, time.Since(start)); err != nil {
				return nil, err
			}
		}
	}
	return nil, fmt.Errorf("lock: acquire: gave up after %d attempts: %w", maxConflicts, lastErr)
}

// errDeadline is why an attempt that ran past its intent's deadline gave
// up.
var errDeadline = errors.New("the attempt ran past its intent's deadline")

// attemptClaim is one attempt: the lock when it was confirmed, else the
// decision that stopped it (refuse, watch, back off) or an error.
func (a *acquirer) attemptClaim(ctx context.Context, acq string, start, deadline time.Time) (l *Lock, d decision, confirmTried bool, err error) {
	dctx, cancel := context.WithDeadlineCause(ctx, deadline, errDeadline)
	defer cancel()
	put := func(name string, rec Record) (store.Info, error) {
		data, err := rec.encode()
		if err != nil {
			return store.Info{}, err
		}
		rctx, rcancel := a.request(dctx)
		defer rcancel()
		info, err := a.st.Put(rctx, name, data, store.PutOptions{})
		if err == nil && !time.Now().Before(deadline) {
			err = errDeadline // an answer too late to trust
		}
		return info, err
	}

	rec := a.record(acq, stateIntent, 0, time.Now())
	intent, err := put(intentName(acq), rec)
	if err != nil {
		return nil, decision{}, false, fmt.Errorf("write intent: %w", err)
	}
	v, err := a.scan.scan(dctx)
	if err != nil {
		return nil, decision{}, false, err
	}
	v.ageIntentsAt(intent.Now)
	if d, err = a.decide(dctx, v, acq); err != nil {
		return nil, decision{}, false, err
	}
	if d.kind != vTake || d.backoff {
		return nil, d, false, nil
	}
	e, err := a.nextEpoch(v)
	if err != nil {
		return nil, decision{}, false, err
	}
	sent := time.Now()
	rec.State, rec.Epoch, rec.Heartbeat = stateHeld, e, sent.UTC()
	info, err := put(heldName(acq), rec)
	if err != nil {
		return nil, decision{}, true, fmt.Errorf("confirm: %w", err)
	}
	// Confirmed before the deadline: nobody can have judged our intent
	// dead. The marker before the fence opens: whoever comes next counts
	// on from it, and a holder that finds a higher one knows it lost. Our
	// intent stays until the release, which deletes it with our held
	// claim and what this look found dead, in one request (docs/adr/0067):
	// a listing that shows it shows our held claim too, which is judged.
	if err := a.writeMarker(ctx, e, acq); err != nil {
		return nil, decision{}, true, err
	}
	l = newLock(a, heldName(acq), rec, info.Version, sent, a.cleanupList(v, rec, heldName(acq)))
	attrs := []any{"epoch", e, "mode", a.mode}
	a.logTakeovers(d.takeovers, attrs...)
	a.log.Info("state lock acquired", attrs...)
	return l, decision{}, true, nil
}

// dropAttempt deletes the claims of a failed attempt (best effort: a
// leftover is ours to delete at the next look, or dies on its own).
func (a *acquirer) dropAttempt(ctx context.Context, acq string, confirmTried bool) {
	names := []string{intentName(acq)}
	if confirmTried {
		names = append(names, heldName(acq))
	}
	rctx, cancel := a.request(context.WithoutCancel(ctx))
	defer cancel()
	_ = deleteMany(rctx, a.st, a.log, names...)
}
