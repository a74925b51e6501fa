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
	"github.com/google/uuid"
)

// maxAttempts bounds how often Acquire re-reads the lock after a conflict
// or an ambiguous write failure before giving up.
const maxAttempts = 8

// Acquire takes the instance lock of st, or refuses with a *HeldError
// (errors.Is(err, ErrHeld)) naming the live foreign holder, whose lock it
// leaves untouched. st must be an unfenced store: the lock writes its own
// object through st.Internal(). ctx bounds the acquisition only; the lock,
// once held, lives until [Lock.Release] or until it is lost.
//
// The rules, in order, for a lock object found on the store:
//
//   - it carries our acquisition id: ours already (our write landed but its
//     answer was lost);
//   - same instance id: ours from a previous life (a crash-restarted
//     container keeps its hostname): taken over at once;
//   - not refreshed for StaleAfter (or for the longer window its holder
//     recorded), on the storage's clock: taken over;
//   - written from our PID space (same host, boot and PID namespace) by a
//     process that is dead, or whose PID now belongs to a process started at
//     another time: taken over at once;
//   - unreadable (wrong key, garbage): taken over with a warning, so that
//     the lock never bricks a boot; with Options.RefuseUnreadable (operator
//     tools) only once stale, and refused with a *HeldError before;
//   - otherwise: held by a live foreign instance; refused, or waited for
//     with Options.WaitForStale.
//
// On a backend with conditional writes every write is compare-and-swap and
// two acquirers can never both win. Without them (ModeAdvisory) the lock
// is written unconditionally and read back after Options.SettleDelay: a
// tripwire against a second instance, not consensus.
func Acquire(ctx context.Context, st *store.Store, opts Options) (*Lock, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	hostname, _ := os.Hostname()
	a := &acquirer{
		st:       st.Internal(),
		o:        o,
		log:      o.Logger.With("instance", o.InstanceID),
		self:     selfProcess(),
		hostname: hostname,
		id:       uuid.NewString(),
	}
	if st.ConditionalWrites() {
		a.mode = ModeCAS
	} else {
		a.mode = ModeAdvisory
	}
	return a.run(ctx)
}

type acquirer struct {
	st       *store.Store
	o        Options
	log      *slog.Logger
	self     process
	hostname string
	id       string
	mode     Mode
}

// takeover is a decision to write our record over what was observed.
type takeover struct {
	reason string // empty for a fresh lock
	warn   bool   // log as a warning (unreadable lock)
}

func (a *acquirer) run(ctx context.Context) (*Lock, error) {
	var lastErr error
	var firstWrite time.Time // start of our first write: the oldest our record can be
	var lastHeld *HeldError  // the live holder we are waiting for, with WaitForStale
	var saved *savedEpoch    // the saved epoch, when the last look found no readable lock
	for attempt := 0; attempt < maxAttempts; attempt++ {
		obs, err := observe(ctx, a.st, true)
		if err != nil {
			if lastHeld != nil && ctx.Err() != nil {
				return nil, waitErr(ctx, lastHeld)
			}
			return nil, err
		}
		if obs.readable && obs.rec.AcquisitionID == a.id {
			// Our write landed; its answer was lost or a rival's read-back
			// raced ours. Either way the object on the store is ours.
			a.log.Info("state lock acquired (our earlier write had landed)", "epoch", obs.rec.Epoch, "mode", a.mode)
			return newLock(a, obs.rec, obs.info.Version, firstWrite, saved), nil
		}
		t, held := a.decide(obs)
		if held != nil {
			if !a.o.WaitForStale {
				return nil, held
			}
			lastHeld = held
			if err := a.wait(ctx, held); err != nil {
				return nil, err
			}
			attempt-- // waiting is not a failed attempt
			continue
		}
		saved = nil
		if !obs.readable {
			// No lock record to count from: the epoch of the last lock
			// released or broken is saved in its own object.
			s, err := readEpoch(ctx, a.st, a.log)
			if err != nil {
				if ctx.Err() != nil {
					return nil, fmt.Errorf("lock: acquire: %w", ctx.Err())
				}
				a.log.Warn("reading the saved lock epoch failed; reading the lock again", "err", err)
				lastErr = err
				continue
			}
			saved = &s
		}
		if firstWrite.IsZero() {
			firstWrite = time.Now()
		}
		rec, info, err := a.write(ctx, obs, saved)
		switch {
		case err == nil:
		case errors.Is(err, backend.ErrPreconditionFailed):
			// Someone else wrote in between, or our write landed and a
			// retry reported the conflict: look again.
			lastErr = err
			continue
		case ctx.Err() != nil:
			return nil, fmt.Errorf("lock: acquire: %w", ctx.Err())
		case errors.Is(err, backend.ErrUnsupported), errors.Is(err, store.ErrFenced),
			errors.Is(err, store.ErrTooLarge), errors.Is(err, store.ErrInvalidName):
			return nil, fmt.Errorf("lock: acquire: %w", err) // no retry mends these
		default:
			// The write may or may not have landed; a new look tells.
			a.log.Warn("state lock write failed; reading it again", "err", err)
			lastErr = err
			continue
		}
		if a.mode == ModeAdvisory && a.o.SettleDelay > 0 {
			ok, err := a.readBack(ctx)
			if err != nil {
				return nil, err
			}
			if !ok {
				lastErr = errors.New("another instance wrote the lock during the settle delay")
				continue
			}
		}
		l := newLock(a, rec, info.Version, firstWrite, saved)
		attrs := []any{"epoch", rec.Epoch, "mode", a.mode}
		switch {
		case t.warn:
			a.log.Warn("state lock taken over: "+t.reason, attrs...)
		case t.reason != "":
			a.log.Info("state lock taken over: "+t.reason, attrs...)
		default:
			a.log.Info("state lock acquired", attrs...)
		}
		return l, nil
	}
	return nil, fmt.Errorf("lock: acquire: gave up after %d attempts: %w", maxAttempts, lastErr)
}

// decide applies the takeover rules to an observation: a takeover to write,
// or the refusal.
func (a *acquirer) decide(obs observation) (takeover, *HeldError) {
	window := obs.window(a.o.StaleAfter)
	switch {
	case !obs.present:
		return takeover{}, nil
	case !obs.readable && !a.o.RefuseUnreadable:
		return takeover{reason: fmt.Sprintf("the lock object is unreadable (%v); the lock must never brick a boot", obs.why), warn: true}, nil
	case !obs.readable && obs.age >= window:
		return takeover{reason: fmt.Sprintf("the lock object is unreadable (%v) and stale: last written %s ago, stale after %s", obs.why, roundAge(obs.age), window), warn: true}, nil
	case !obs.readable:
		return takeover{}, obs.held(window, a.o.Refusal)
	case obs.rec.InstanceID == a.o.InstanceID:
		return takeover{reason: fmt.Sprintf("it was held by this instance id (pid %d on %s, heartbeat %s ago): a restart", obs.rec.PID, obs.rec.Hostname, roundAge(obs.age))}, nil
	case obs.age >= window:
		return takeover{reason: fmt.Sprintf("it was stale: %q (pid %d on %s) last refreshed it %s ago, stale after %s", obs.rec.InstanceID, obs.rec.PID, obs.rec.Hostname, roundAge(obs.age), window)}, nil
	}
	switch l := probeHolder(a.self, a.hostname, obs.rec); l {
	case dead, reused:
		return takeover{reason: fmt.Sprintf("its holder %q (pid %d) on this host is gone (%s)", obs.rec.InstanceID, obs.rec.PID, l)}, nil
	}
	return takeover{}, obs.held(window, a.o.Refusal)
}

// write puts our record over what obs saw: compare-and-swap in ModeCAS,
// unconditionally in ModeAdvisory. Its epoch is one more than that of the
// record obs read or, when there was none readable, than the saved epoch.
func (a *acquirer) write(ctx context.Context, obs observation, saved *savedEpoch) (Record, store.Info, error) {
	now := time.Now().UTC()
	rec := Record{
		InstanceID:    a.o.InstanceID,
		Hostname:      a.hostname,
		PID:           a.self.pid,
		ProcessStart:  a.self.start,
		ProcessScope:  a.self.scope,
		AcquiredAt:    now,
		Heartbeat:     now,
		Epoch:         1,
		Mode:          a.mode,
		StaleAfter:    a.o.StaleAfter,
		AcquisitionID: a.id,
	}
	switch {
	case obs.readable:
		rec.Epoch = obs.rec.Epoch + 1
	case saved != nil:
		rec.Epoch = saved.epoch + 1
	}
	data, err := rec.encode()
	if err != nil {
		return Record{}, store.Info{}, err
	}
	var po store.PutOptions
	if a.mode == ModeCAS {
		if obs.present {
			po.IfVersion = obs.info.Version
		} else {
			po.IfAbsent = true
		}
	}
	info, err := a.st.Put(ctx, Name, data, po)
	if err != nil {
		return Record{}, store.Info{}, fmt.Errorf("lock: write %s: %w", Name, err)
	}
	return rec, info, nil
}

// readBack waits for the settle delay and reports whether the lock object
// still carries our acquisition id.
func (a *acquirer) readBack(ctx context.Context) (bool, error) {
	if err := sleep(ctx, a.o.SettleDelay); err != nil {
		return false, fmt.Errorf("lock: acquire: %w", err)
	}
	obs, err := observe(ctx, a.st, false)
	if err != nil {
		return false, err
	}
	return obs.readable && obs.rec.AcquisitionID == a.id, nil
}

// wait sleeps until the held lock could have gone stale (or a heartbeat
// interval, whichever is shorter, to notice a release early).
func (a *acquirer) wait(ctx context.Context, held *HeldError) error {
	d := min(held.StaleIn, a.o.HeartbeatInterval)
	d = max(d, 10*time.Millisecond)
	a.log.Info("waiting for the state lock", "holder", held.holderName(), "pid", held.Holder.PID,
		"heartbeat_age", roundAge(held.HeartbeatAge), "stale_in", roundAge(held.StaleIn))
	if err := sleep(ctx, d); err != nil {
		return waitErr(ctx, held)
	}
	return nil
}

func waitErr(ctx context.Context, held *HeldError) error {
	return fmt.Errorf("lock: waiting for %s to release the lock or go stale: %w (last seen: %w)", held.holderName(), ctx.Err(), held)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
