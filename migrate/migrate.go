package migrate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode"

	"github.com/cairnhq/state/internal/lockadmin"
	"github.com/cairnhq/state/internal/migratelog"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// maxIDLen bounds a migration ID; IDs are names for humans, not payloads.
const maxIDLen = 200

// Migration is one step of an application's migrations.
type Migration struct {
	// ID identifies the step in the log forever: never rename or reuse it.
	// Ordering comes from the slice, not from the ID, but a sortable
	// prefix ("0003-...") helps readers.
	ID string
	// Description says what the step does, for logs and `migrate status`.
	Description string
	// Up performs the step. It must be idempotent: after a crash it is
	// called again on state it may already have changed in part. The store
	// it gets is fenced by the instance lock, and ctx is cancelled when the
	// lock is lost.
	Up func(ctx context.Context, st *store.Store) error
	// NonRepeatable declares that Up cannot safely run again after it was
	// interrupted. Run then stops with an *InterruptedError instead of
	// re-running it.
	NonRepeatable bool
}

// Options configure Run.
type Options struct {
	// Logger receives progress; nil means slog.Default().
	Logger *slog.Logger
	// AllowUnknown lets Run proceed when the log holds applied steps that
	// are not in the slice (for example after a downgrade). By default Run
	// refuses, because older code may not understand newer state.
	AllowUnknown bool
}

// Result says what a Run did.
type Result struct {
	// Ran lists the IDs of the steps Up was called for, in order.
	Ran []string
	// Rerun lists the IDs among Ran that had been interrupted or had failed
	// before and were run again.
	Rerun []string
	// AlreadyApplied counts the steps that were applied before this Run.
	AlreadyApplied int
}

var (
	// ErrLockNotHeld means the instance lock given to Run, MarkApplied or
	// MarkPending is nil, was lost or was released.
	ErrLockNotHeld = errors.New("instance lock not held")
	// ErrInterrupted means a non-repeatable step was interrupted; see
	// InterruptedError.
	ErrInterrupted = errors.New("non-repeatable migration was interrupted")
	// ErrUnknownMigration means the log has applied steps that the given
	// slice does not contain.
	ErrUnknownMigration = errors.New("log has migrations this code does not know")
	// ErrInvalidMigration means the slice itself is unusable: an empty or
	// duplicate ID, or a nil Up.
	ErrInvalidMigration = errors.New("invalid migration")
	// ErrNoSuchMigration means MarkApplied or MarkPending was given an ID
	// that is not in the log.
	ErrNoSuchMigration = errors.New("no such migration in the log")
)

// InterruptedError reports a non-repeatable step that started and never
// finished. It matches ErrInterrupted with errors.Is.
type InterruptedError struct {
	// ID is the step's Migration.ID: what MarkApplied and MarkPending
	// take.
	ID string
	// rec is the step's record in the log, for the message.
	rec migratelog.Record
}

// Error tells what happened and the exact calls that resolve it.
func (e *InterruptedError) Error() string {
	r := e.rec
	how := "was started"
	if r.State == migratelog.StateFailed {
		how = fmt.Sprintf("failed (%s)", r.Error)
	} else {
		how += " and never finished"
	}
	return fmt.Sprintf("migration %q %s at %s by instance %q (lock epoch %d, attempt %d); "+
		"it is non-repeatable, so it is not run again automatically. "+
		"Inspect the state, then call migrate.MarkApplied(ctx, lk, st, %q, note) if its effects are complete, "+
		"or migrate.MarkPending(ctx, lk, st, %q, note) to run it again from the start on the next Run",
		r.ID, how, r.StartedAt.Format(time.RFC3339), r.InstanceID, r.Epoch, r.Attempts, r.ID, r.ID)
}

// Is reports whether target is ErrInterrupted.
func (e *InterruptedError) Is(target error) bool { return target == ErrInterrupted }

// Run runs, in order, every migration of ms that the log does not record as
// applied, while l is held. It refuses to start unless l.Err() is nil, and
// checks it again before each step. Each step is recorded as started before
// Up is called and as applied after it returns nil. A step found started
// but never finished (its process died) is run again, with a warning that
// says so, unless it is NonRepeatable: then Run stops with an
// *InterruptedError. Run stops at the first error; steps after it stay
// pending.
func Run(ctx context.Context, l *lock.Lock, st *store.Store, ms []Migration, opts Options) (Result, error) {
	var res Result
	if err := held(l, st); err != nil {
		return res, err
	}
	if err := validate(ms); err != nil {
		return res, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	lg, exists, err := migratelog.Read(ctx, st)
	if err != nil {
		return res, err
	}
	fenced := l.Fence(st)
	if exists {
		// A log written before its manifest recorded it (an interrupted
		// first run): record it now.
		if err := recordLog(ctx, fenced); err != nil {
			return res, fmt.Errorf("migrations: %w", err)
		}
	}
	if unknown := unknownApplied(lg, ms); len(unknown) > 0 {
		if !opts.AllowUnknown {
			return res, fmt.Errorf("migrations: %w: %q are recorded as applied in %s but are not in the list given to Run "+
				"(was the state migrated by a newer version?); set Options.AllowUnknown to proceed anyway",
				ErrUnknownMigration, unknown, logName)
		}
		logger.Warn("migration log has applied steps this code does not know; proceeding (AllowUnknown)", "ids", unknown)
	}

	// Stop Up's context as soon as the lock goes: a step must not keep
	// writing after another instance took over.
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(l.Context(), func() {
		cancel(fmt.Errorf("migrations: %w: %w", ErrLockNotHeld, l.Err()))
	})
	defer stop()

	rec := l.Record()
	pending := 0
	for _, m := range ms {
		if r := lg.Find(m.ID); r == nil || r.State != migratelog.StateApplied {
			pending++
		}
	}
	if pending == 0 {
		logger.Info("migrations: nothing to do", "applied", len(ms))
		res.AlreadyApplied = len(ms)
		return res, nil
	}
	logger.Info("migrations: starting", "pending", pending, "applied", len(ms)-pending)

	for i, m := range ms {
		prev := lg.Find(m.ID)
		if prev != nil && prev.State == migratelog.StateApplied {
			res.AlreadyApplied++
			continue
		}
		interrupted := prev != nil && prev.State != migratelog.StatePending
		if later := appliedAfter(lg, ms[i+1:]); later != "" && !interrupted {
			logger.Warn("migration was added before one that is already applied; running it now",
				"id", m.ID, "already_applied", later)
		}
		if interrupted {
			if m.NonRepeatable {
				r := *prev
				return res, fmt.Errorf("migrations: %w", &InterruptedError{ID: r.ID, rec: r})
			}
			logger.Warn("migration did not finish before; running it again (migrations are idempotent by contract)",
				"id", m.ID, "previous_state", prev.State, "started_at", prev.StartedAt,
				"instance", prev.InstanceID, "epoch", prev.Epoch, "attempts", prev.Attempts, "previous_error", prev.Error)
			res.Rerun = append(res.Rerun, m.ID)
		}
		if err := held(l, st); err != nil {
			return res, err
		}
		if err := runCtx.Err(); err != nil {
			return res, fmt.Errorf("migrations: before %q: %w", m.ID, context.Cause(runCtx))
		}

		started := time.Now().UTC()
		_, err = updateLog(ctx, fenced, func(lg *migratelog.Log) error {
			r := lg.Upsert(m.ID)
			r.Description = m.Description
			r.State = migratelog.StateStarted
			r.NonRepeatable = m.NonRepeatable
			r.Attempts++
			r.StartedAt = started
			r.FinishedAt = time.Time{}
			r.InstanceID = rec.InstanceID
			r.Epoch = rec.Epoch
			r.Error = ""
			r.Note = ""
			return nil
		})
		if err != nil {
			return res, fmt.Errorf("migrations: recording %q as started: %w", m.ID, err)
		}
		logger.Info("migration started", "id", m.ID, "description", m.Description)
		res.Ran = append(res.Ran, m.ID)

		upErr := callUp(withLogger(runCtx, logger.With("migration", m.ID)), m, fenced)
		if upErr != nil {
			if cause := context.Cause(runCtx); cause != nil && errors.Is(upErr, runCtx.Err()) {
				upErr = fmt.Errorf("%w (%w)", upErr, cause)
			}
			// Record the failure for `migrate status`; best effort, since
			// the lock may be the reason for the failure. Either way the
			// next Run sees a step that did not finish.
			wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			if _, werr := updateLog(wctx, fenced, func(lg *migratelog.Log) error {
				r := lg.Upsert(m.ID)
				r.State = migratelog.StateFailed
				r.FinishedAt = time.Now().UTC()
				r.Error = upErr.Error()
				return nil
			}); werr != nil {
				logger.Warn("could not record migration failure", "id", m.ID, "err", werr)
			}
			wcancel()
			logger.Error("migration failed", "id", m.ID, "err", upErr)
			return res, fmt.Errorf("migration %q (%s): %w", m.ID, m.Description, upErr)
		}

		lg, err = updateLog(ctx, fenced, func(lg *migratelog.Log) error {
			r := lg.Upsert(m.ID)
			r.State = migratelog.StateApplied
			r.FinishedAt = time.Now().UTC()
			return nil
		})
		if err != nil {
			return res, fmt.Errorf("migrations: %q ran but recording it as applied failed (it will run again): %w", m.ID, err)
		}
		logger.Info("migration applied", "id", m.ID, "took", time.Since(started).Round(time.Millisecond))
	}
	logger.Info("migrations: done", "ran", len(res.Ran), "rerun", len(res.Rerun))
	return res, nil
}

// callUp runs m.Up, turning a panic into an error so that the failure is
// recorded rather than leaving only a "started" record behind.
func callUp(ctx context.Context, m Migration, st *store.Store) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return m.Up(ctx, st)
}

// MarkApplied records the step id as applied without running it: the
// resolution for an interrupted non-repeatable step whose effects an
// operator found complete. note is kept in the log. It needs the lock.
func MarkApplied(ctx context.Context, l *lock.Lock, st *store.Store, id, note string) error {
	return resolve(ctx, l, st, id, migratelog.StateApplied, note)
}

// MarkPending records the step id as pending so that the next Run runs it
// again from the start, even when it is non-repeatable. note is kept in the
// log. It needs the lock.
func MarkPending(ctx context.Context, l *lock.Lock, st *store.Store, id, note string) error {
	return resolve(ctx, l, st, id, migratelog.StatePending, note)
}

func resolve(ctx context.Context, l *lock.Lock, st *store.Store, id string, to migratelog.State, note string) error {
	if err := held(l, st); err != nil {
		return err
	}
	_, err := updateLog(ctx, l.Fence(st), func(lg *migratelog.Log) error {
		r := lg.Find(id)
		if r == nil {
			return ErrNoSuchMigration
		}
		r.State = to
		r.FinishedAt = time.Now().UTC()
		r.Note = note
		r.InstanceID = l.Record().InstanceID
		r.Epoch = l.Record().Epoch
		return nil
	})
	if err != nil {
		return fmt.Errorf("migrations: marking %q %s: %w", id, to, err)
	}
	return nil
}

func held(l *lock.Lock, st *store.Store) error {
	if l == nil {
		return fmt.Errorf("migrations refused: %w: no lock given", ErrLockNotHeld)
	}
	if err := l.Err(); err != nil {
		return fmt.Errorf("migrations refused: %w: %w", ErrLockNotHeld, err)
	}
	if !lockadmin.Guards(l, st) {
		return fmt.Errorf("migrations refused: %w: the lock given is the lock of another store (backend or root differs)", ErrLockNotHeld)
	}
	return nil
}

func validate(ms []Migration) error {
	seen := make(map[string]bool, len(ms))
	for i, m := range ms {
		bad := func(why string) error {
			return fmt.Errorf("migrations: %w: #%d (%q): %s", ErrInvalidMigration, i, m.ID, why)
		}
		switch {
		case m.ID == "":
			return bad("empty ID")
		case len(m.ID) > maxIDLen:
			return bad(fmt.Sprintf("ID longer than %d bytes", maxIDLen))
		case seen[m.ID]:
			return bad("duplicate ID")
		case m.Up == nil:
			return bad("nil Up")
		}
		for _, r := range m.ID {
			if unicode.IsControl(r) {
				return bad("control character in ID")
			}
		}
		seen[m.ID] = true
	}
	return nil
}

type loggerKey struct{}

func withLogger(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey{}, l)
}

// Logger returns the logger of the Run that called Up with ctx, tagged with
// the migration's ID, so that a step can report progress; outside a Run it
// returns slog.Default().
func Logger(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}
