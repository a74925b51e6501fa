package state

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/boot"
	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/setup"
	"github.com/cairnhq/state/internal/storeadmin"
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

// ErrBadURL means the backend URL could not be understood.
var ErrBadURL = setup.ErrBadURL

// ErrNoStore means the backend URL names a directory that does not exist
// while a store id is pinned (nothing to open, and nothing is created).
var ErrNoStore = setup.ErrNoStore

// ErrNoIdentity means no identity was configured: nothing could open the
// state, so Open refuses to start.
var ErrNoIdentity = errors.New("no identity configured")

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
// manifest before the lock is touched, and nothing is written when it
// fails: an identity that does not belong to the store fails with an
// error matching store.ErrNotMember (naming the store), a store
// other than Config.StoreID with store.ErrWrongStore, a damaged manifest
// with store.ErrBadManifest, a missing one (other objects present) with
// store.ErrManifestMissing. Where there is no store at all, Open creates
// one — unless Config.StoreID pins one (store.ErrNoStore) — and logs a
// warning with the new store's id and how to pin it. When ctx is
// cancelled (for example by signal.NotifyContext on SIGTERM), the stage
// under way stops and Open fails with the context's error.
func Open(ctx context.Context, cfg Config) (*Instance, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}

	// A malformed store id fails before the backend is opened; Connect
	// parses the same text again for its pin.
	if cfg.StoreID != "" {
		if _, err := envelope.ParseStoreID(cfg.StoreID); err != nil {
			return nil, &OpenError{StageStore, fmt.Errorf("Config.StoreID: %w", err)}
		}
	}
	b, root := cfg.Backend, cfg.Root
	if b == nil {
		var err error
		// A pinned store is never created: its missing directory is not
		// made either.
		if b, root, err = setup.OpenBackend(ctx, cfg.URL, setup.BackendOptions{Logger: logger, MustExist: cfg.StoreID != ""}); err != nil {
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

	location := setup.RedactURL(cfg.URL)
	if cfg.Backend != nil {
		location = ""
	}
	st, l, err := boot.Open(ctx, b, keys, boot.Options{
		Store:                       store.Options{Root: root, MaxObjectSize: cfg.MaxObjectSize, History: cfg.History, RejectRollback: cfg.RejectRollback, Logger: logger, MeterProvider: cfg.MeterProvider},
		Location:                    location,
		Create:                      true,
		StoreID:                     cfg.StoreID,
		RequireConfiguredRecipients: cfg.RequireConfiguredRecipients,
		Lock: lock.Options{
			InstanceID:        cfg.InstanceID,
			HeartbeatInterval: cfg.HeartbeatInterval,
			StaleAfter:        cfg.StaleAfter,
			WaitForStale:      cfg.WaitForStale,
			Logger:            logger,
			MeterProvider:     cfg.MeterProvider,
		},
	})
	var lockErr *boot.LockError
	switch {
	case errors.As(err, &lockErr):
		if errors.Is(err, lock.ErrHeld) {
			return fail(StageLock, fmt.Errorf("refusing to start: %w", lockErr.Err))
		}
		return fail(StageLock, lockErr.Err)
	case errors.Is(err, envelope.ErrInvalidIdentity), errors.Is(err, envelope.ErrInvalidRecipient):
		return fail(StageEnvelope, err)
	case err != nil:
		return fail(StageStore, err)
	}
	// Configured recipients that are a subset of the store's (the store
	// also seals to a recovery key this instance does not carry) are no
	// difference: everything is still sealed to them.
	if d := storeadmin.RecipientDiff(st); len(d.NotSealedTo) > 0 {
		m, _ := storeadmin.Manifest(st)
		logger.Warn("state: the configured recipients differ from the store's; objects are sealed to the store's recipients. "+
			"To change the store's set, run cairn-state rekey with the identities and recipients it should have",
			"store_id", m.ID, "difference", d.String(),
			"not_sealed_to", len(d.NotSealedTo), "not_configured", len(d.NotConfigured))
	}

	var res migrate.Result
	if len(cfg.Migrations) > 0 {
		res, err = migrate.Run(ctx, l, st, cfg.Migrations, migrate.Options{Logger: logger, AllowUnknown: cfg.AllowUnknownMigrations})
	}
	if err == nil {
		// Ready means written, history included: the keeps the
		// migrations' writes left behind them land first (ADR 0065).
		err = storeadmin.WaitKeeps(ctx, st)
	}
	if err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), boot.ReleaseTimeout)
		defer cancel()
		if rerr := l.Release(rctx); rerr != nil && !errors.Is(rerr, lock.ErrLost) {
			logger.Warn("state: releasing the lock after failed migrations", "err", rerr)
		}
		return fail(StageMigrations, err)
	}

	rec := l.Record()
	m, _ := storeadmin.Manifest(st)
	logger.Info("state: ready", "instance", rec.InstanceID, "epoch", rec.Epoch, "mode", rec.Mode,
		"store_id", m.ID, "migrations_ran", len(res.Ran))
	return &Instance{
		backend:     b,
		ownsBackend: cfg.Backend == nil,
		store:       st,
		fenced:      l.Fence(st),
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
	for _, path := range cfg.IdentityFiles {
		f, err := setup.ReadIdentityFile(path)
		if err != nil {
			return k, err
		}
		if f.OpenToOthers() {
			logger.Warn("state: the identity file is accessible by group or others; chmod 600 it",
				"file", path, "mode", fmt.Sprintf("%04o", f.Mode))
		}
		k.Identities = append(k.Identities, f.Identities...)
	}
	k.Identities = append(k.Identities, cfg.Identities...)
	if len(k.Identities) == 0 {
		return k, fmt.Errorf("%w: set %s to an age identity file (create one with `cairn-state keygen -o FILE`) or set Config.IdentityFiles",
			ErrNoIdentity, setup.EnvIdentity)
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
// contexts of work that writes state from it. Close cancels it only after
// the writes in flight are done. A write cut off by it (or by any context)
// may still have landed, and its error says so; on storage with
// conditional writes it can never land over the next holder's writes
// (docs/lock.md).
func (i *Instance) Context() context.Context { return i.lock.Context() }

// Migrations reports what the boot's migrations did.
func (i *Instance) Migrations() migrate.Result { return i.migrations }

// Close releases the instance lock: it refuses new writes, waits for the
// writes in flight (each bounded by the lock's lease), then deletes the
// lock (only if it is still this instance's) and stops its heartbeat, so
// that the next instance's first write comes after every write of this
// one that was answered. If ctx ends before the writes in flight do, the
// lock is left to go stale and Close returns an error. If the lock had
// already been lost,
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
