package state

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"filippo.io/age"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/envelope"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/migrate"
	"github.com/cairnhq/state/store"
)

// Stage is one step of the boot sequence.
type Stage string

// The stages of Open, in order.
const (
	StageBackend    Stage = "backend"
	StageEnvelope   Stage = "envelope"
	StageStore      Stage = "store"
	StageLock       Stage = "lock"
	StageMigrations Stage = "migrations"
)

// OpenError is the error of a failed Open: the stage that failed and why.
// errors.Is and errors.As reach the cause, e.g. lock.ErrHeld and
// *lock.HeldError when another instance holds the lock.
type OpenError struct {
	Stage Stage
	Err   error
}

// Error names the stage, then the cause.
func (e *OpenError) Error() string {
	return fmt.Sprintf("state: open: %s: %v", e.Stage, e.Err)
}

// Unwrap returns the cause.
func (e *OpenError) Unwrap() error { return e.Err }

// ErrNoIdentity means no identity was configured: nothing could open the
// state, so Open refuses to start.
var ErrNoIdentity = errors.New("no identity configured")

// releaseTimeout bounds the lock release that Open does on its own
// failure paths, where the caller's context may already be done.
const releaseTimeout = 10 * time.Second

// Instance is an open state store whose instance lock this process holds.
type Instance struct {
	backend     backend.Backend
	ownsBackend bool         // opened from the URL, so Close closes it
	store       *store.Store // unfenced; the lock writes through it
	fenced      *store.Store
	lock        *lock.Lock
	migrations  migrate.Result
	logger      *slog.Logger

	closeOnce sync.Once
	closeErr  error
}

// Open boots: backend → envelope → store → lock → migrations. It returns an
// *OpenError naming the stage that failed; a failure after the lock was
// taken releases it before Open returns. When ctx is cancelled (for
// example by signal.NotifyContext on SIGTERM), the stage under way stops
// and Open fails with the context's error.
func Open(ctx context.Context, cfg Config) (*Instance, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}

	b, root := cfg.Backend, cfg.Root
	if b == nil {
		var err error
		if b, root, err = OpenBackend(ctx, cfg.URL, BackendOptions{Logger: logger}); err != nil {
			return nil, &OpenError{StageBackend, err}
		}
	}
	fail := func(stage Stage, err error) (*Instance, error) {
		closeBackend(b, cfg.Backend != nil)
		return nil, &OpenError{stage, err}
	}

	env, err := openEnvelope(cfg, logger)
	if err != nil {
		return fail(StageEnvelope, err)
	}

	st, err := store.Open(b, env, store.Options{Root: root, MaxObjectSize: cfg.MaxObjectSize, Logger: logger,
		MeterProvider: cfg.MeterProvider})
	if err != nil {
		return fail(StageStore, err)
	}

	l, err := lock.Acquire(ctx, st, lock.Options{
		InstanceID:        cfg.InstanceID,
		HeartbeatInterval: cfg.HeartbeatInterval,
		StaleAfter:        cfg.StaleAfter,
		WaitForStale:      cfg.WaitForStale,
		Logger:            logger,
		MeterProvider:     cfg.MeterProvider,
	})
	if errors.Is(err, lock.ErrHeld) {
		return fail(StageLock, fmt.Errorf("refusing to start: %w", err))
	}
	if err != nil {
		return fail(StageLock, err)
	}

	var res migrate.Result
	if len(cfg.Migrations) > 0 {
		res, err = migrate.Run(ctx, l, st, cfg.Migrations, migrate.Options{Logger: logger, AllowUnknown: cfg.AllowUnknownMigrations})
	}
	if err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		if rerr := l.Release(rctx); rerr != nil && !errors.Is(rerr, lock.ErrLost) {
			logger.Warn("state: releasing the lock after failed migrations", "err", rerr)
		}
		return fail(StageMigrations, err)
	}

	rec := l.Record()
	logger.Info("state: ready", "instance", rec.InstanceID, "epoch", rec.Epoch, "mode", rec.Mode,
		"migrations_ran", len(res.Ran))
	return &Instance{
		backend:     b,
		ownsBackend: cfg.Backend == nil,
		store:       st,
		fenced:      st.WithFence(l),
		lock:        l,
		migrations:  res,
		logger:      logger,
	}, nil
}

// openEnvelope loads the identities and recipients of cfg. An identity
// file that group or others may access is warned about, not refused: the
// platforms an application boots on cannot always give 0600 (ADR 0018).
func openEnvelope(cfg Config, logger *slog.Logger) (*envelope.Envelope, error) {
	var ids []age.Identity
	for _, f := range cfg.IdentityFiles {
		if mode, open := IdentityFileOpenToOthers(f); open {
			logger.Warn("state: the identity file is accessible by group or others; chmod 600 it",
				"file", f, "mode", fmt.Sprintf("%04o", mode))
		}
		got, err := envelope.LoadIdentityFile(f)
		if err != nil {
			return nil, err
		}
		ids = append(ids, got...)
	}
	ids = append(ids, cfg.Identities...)
	if len(ids) == 0 {
		return nil, fmt.Errorf("%w: set %s to an age identity file (create one with `cairn-state keygen -o FILE`) or set Config.IdentityFiles",
			ErrNoIdentity, EnvIdentity)
	}
	var rcpts []age.Recipient
	for _, s := range cfg.Recipients {
		r, err := envelope.ParseRecipient(s)
		if err != nil {
			return nil, err
		}
		rcpts = append(rcpts, r)
	}
	// Until the store layer binds envelopes to the store id, objects are
	// sealed unbound (format v2, zero store id) and legacy v1 objects of
	// existing stores keep opening.
	return envelope.New(ids, rcpts, &envelope.Options{AcceptLegacy: true})
}

// Store returns the instance's state, fenced by the lock: once the lock is
// lost or released, every write fails with an error matching
// store.ErrFenced. Reserved names (starting with '.') are refused.
func (i *Instance) Store() *store.Store { return i.fenced }

// Lock returns the instance lock, for its Record, Lost channel and
// Context.
func (i *Instance) Lock() *lock.Lock { return i.lock }

// Lost is closed when the instance lock is lost: another instance took
// over. The store refuses writes from then on; the application should stop
// serving.
func (i *Instance) Lost() <-chan struct{} { return i.lock.Lost() }

// Context is cancelled when the lock is lost or released: derive the
// contexts of work that writes state from it.
func (i *Instance) Context() context.Context { return i.lock.Context() }

// Migrations reports what the boot's migrations did.
func (i *Instance) Migrations() migrate.Result { return i.migrations }

// Close releases the instance lock (deleting it only if it is still this
// instance's) and stops its heartbeat. If the lock had already been lost,
// Close leaves the new holder's lock alone and returns an error matching
// lock.ErrLost, so that the caller can report that its last writes may have
// been refused. Close is idempotent: later calls return the first result.
func (i *Instance) Close(ctx context.Context) error {
	i.closeOnce.Do(func() {
		err := i.lock.Release(ctx)
		switch {
		case errors.Is(err, lock.ErrLost):
			i.closeErr = fmt.Errorf("state: close: the instance lock had been lost, so it was left to its new holder: %w", err)
		case err != nil:
			i.closeErr = fmt.Errorf("state: close: releasing the lock: %w", err)
		default:
			i.logger.Info("state: closed; lock released", "instance", i.lock.Record().InstanceID)
		}
		closeBackend(i.backend, !i.ownsBackend)
	})
	return i.closeErr
}

// closeBackend closes a backend that has a Close method, unless the caller
// owns it.
func closeBackend(b backend.Backend, callerOwned bool) {
	if c, ok := b.(io.Closer); ok && !callerOwned {
		_ = c.Close()
	}
}
