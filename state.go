package state

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

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
// taken releases it before Open returns. The store stage reads the store's
// manifest before the lock is touched: an identity that does not belong to
// the store fails there with an error matching store.ErrNotMember (a
// *store.NotMemberError), a damaged manifest with store.ErrBadManifest, and
// nothing is written. When ctx is cancelled (for
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

	keys, err := loadKeys(cfg, logger)
	if err != nil {
		return fail(StageEnvelope, err)
	}

	st, l, err := connectAndLock(ctx, b, root, keys, cfg, logger)
	if err != nil {
		var se *stageError
		if errors.As(err, &se) {
			return fail(se.stage, se.err)
		}
		return fail(StageStore, err)
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
	m, _ := st.Manifest()
	logger.Info("state: ready", "instance", rec.InstanceID, "epoch", rec.Epoch, "mode", rec.Mode,
		"store_id", m.ID, "migrations_ran", len(res.Ran))
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

// loadKeys loads the identities and recipients of cfg. An identity file
// that group or others may access is warned about, not refused: the
// platforms an application boots on cannot always give 0600 (ADR 0018).
func loadKeys(cfg Config, logger *slog.Logger) (store.Keys, error) {
	var k store.Keys
	for _, f := range cfg.IdentityFiles {
		if mode, open := IdentityFileOpenToOthers(f); open {
			logger.Warn("state: the identity file is accessible by group or others; chmod 600 it",
				"file", f, "mode", fmt.Sprintf("%04o", mode))
		}
		got, err := envelope.LoadIdentityFile(f)
		if err != nil {
			return k, err
		}
		k.Identities = append(k.Identities, got...)
	}
	k.Identities = append(k.Identities, cfg.Identities...)
	if len(k.Identities) == 0 {
		return k, fmt.Errorf("%w: set %s to an age identity file (create one with `cairn-state keygen -o FILE`) or set Config.IdentityFiles",
			ErrNoIdentity, EnvIdentity)
	}
	for _, s := range cfg.Recipients {
		r, err := envelope.ParseRecipient(s)
		if err != nil {
			return k, err
		}
		k.Recipients = append(k.Recipients, r)
	}
	return k, nil
}

// stageError is an error of connectAndLock that belongs to another stage
// than the store's.
type stageError struct {
	stage Stage
	err   error
}

func (e *stageError) Error() string { return e.err.Error() }

// manifestAttempts bounds how often Open connects again because another
// process created the store's manifest while this one waited for the lock.
const manifestAttempts = 3

// connectAndLock connects to the store — its manifest is read, and the
// identity checked, before the lock is touched (docs/adr/0021) — then takes
// the lock, and, for a new store on a backend without conditional writes,
// writes its manifest under the lock. When another process created the
// manifest meanwhile, it lets the lock go and starts over.
func connectAndLock(ctx context.Context, b backend.Backend, root string, keys store.Keys, cfg Config, logger *slog.Logger) (*store.Store, *lock.Lock, error) {
	for attempt := 1; ; attempt++ {
		st, err := store.Connect(ctx, b, keys, &store.ConnectOptions{Create: true,
			Options: store.Options{Root: root, MaxObjectSize: cfg.MaxObjectSize, Logger: logger, MeterProvider: cfg.MeterProvider}})
		if errors.Is(err, envelope.ErrInvalidIdentity) || errors.Is(err, envelope.ErrInvalidRecipient) {
			return nil, nil, &stageError{StageEnvelope, err}
		}
		if err != nil {
			return nil, nil, err
		}
		if d := st.RecipientDiff(); !d.Empty() {
			m, _ := st.Manifest()
			logger.Warn("state: the configured recipients differ from the store's; objects are sealed to the store's recipients. "+
				"To change the store's set, run cairn-state rekey with the identities and recipients it should have",
				"store_id", m.ID, "difference", d.String(),
				"not_sealed_to", len(d.NotSealedTo), "not_configured", len(d.NotConfigured))
		}
		l, err := lock.Acquire(ctx, st, lock.Options{
			InstanceID:        cfg.InstanceID,
			HeartbeatInterval: cfg.HeartbeatInterval,
			StaleAfter:        cfg.StaleAfter,
			WaitForStale:      cfg.WaitForStale,
			Logger:            logger,
			MeterProvider:     cfg.MeterProvider,
		})
		if err != nil {
			if !st.ManifestWritten() && attempt < manifestAttempts {
				// The lock's objects may be another new store's (its id
				// is not ours yet): look at the manifest again.
				if again, cerr := store.Connect(ctx, b, keys, &store.ConnectOptions{Options: store.Options{Root: root, Logger: logger}}); cerr == nil {
					if _, ok := again.Manifest(); ok {
						continue
					}
				}
			}
			if errors.Is(err, lock.ErrHeld) {
				err = fmt.Errorf("refusing to start: %w", err)
			}
			return nil, nil, &stageError{StageLock, err}
		}
		err = st.WithFence(l).CommitManifest(ctx)
		if err == nil {
			return st, l, nil
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		if rerr := l.Release(rctx); rerr != nil && !errors.Is(rerr, lock.ErrLost) {
			logger.Warn("state: releasing the lock after the manifest could not be written", "err", rerr)
		}
		cancel()
		if !errors.Is(err, store.ErrManifestChanged) || attempt >= manifestAttempts {
			return nil, nil, err
		}
		logger.Info("state: another process created the store's manifest first; connecting to it", "attempt", attempt)
	}
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
