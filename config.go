package state

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"filippo.io/age"
	"go.opentelemetry.io/otel/metric"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/setup"
	"github.com/cairnhq/state/migrate"
)

// Config configures Open. URL (or Backend) and at least one identity are
// required; everything else has a default.
type Config struct {
	// URL is the backend: file:///abs/path, file:rel/path or
	// s3://BUCKET[/ROOT/PREFIX]?endpoint=URL&region=R&path_style=true&conditional=auto|on|off.
	URL string
	// Backend, when not nil, is used instead of URL, with Root as the root
	// prefix. For tests and for applications that build their own backend.
	Backend backend.Backend
	// Root is the root prefix used with Backend; ignored with URL.
	Root string

	// IdentityFiles are age identity files or SSH private keys. Objects
	// open with any of them; one of them must open the store's manifest
	// (.cairn-state/.store), else Open fails with store.ErrNotMember.
	// Objects are sealed to the store's recipient set (for a new store:
	// the recipients of these identities plus Recipients).
	IdentityFiles []string
	// Identities are identities given directly, used after IdentityFiles.
	Identities []age.Identity
	// Recipients are extra recipients in age's text form (age1…, ssh-…),
	// e.g. a recovery key: part of a new store's recipient set; for an
	// existing store they are compared with its set (a difference is
	// logged as a warning) and the store's set is sealed to. A rekey
	// changes the store's set.
	Recipients []string
	// RequireConfiguredRecipients refuses to open a store whose recipient
	// set holds a recipient this configuration does not list (the
	// identities' recipients and Recipients), with
	// store.ErrUnlistedRecipient, before anything is read or written: the
	// store's manifest was put back from before a rekey removed that
	// recipient, or the configuration is behind. Off by default, since a
	// store may rightly hold a recipient its writers do not list (a
	// recovery key kept offline).
	RequireConfiguredRecipients bool

	// StoreID pins the store: its id, 32 hexadecimal digits, as
	// `cairn-state init`, `cairn-state doctor` and the warning logged
	// when a store is created print it. A store with another id is
	// refused (store.ErrWrongStore) before anything is read or written,
	// and no store is created where there is none (store.ErrNoStore), so
	// that a store swapped for another, or a location emptied, is not
	// served. Empty: any store, and a new one is created on the first
	// boot.
	StoreID string

	// InstanceID names this instance in the lock; empty means the host
	// name, so that a restarted container takes its own lock back at once.
	InstanceID string
	// HeartbeatInterval is how often the lock is refreshed; 0 means the
	// lock package's default (60s).
	HeartbeatInterval time.Duration
	// StaleAfter is how old a lock's heartbeat must be before another
	// instance takes it over; 0 means the lock package's default (5m).
	StaleAfter time.Duration
	// WaitForStale makes Open wait for a live foreign lock to go stale
	// instead of failing at once.
	WaitForStale bool

	// Migrations run, in order, once the lock is held. With none, the
	// stage is skipped and the migration log is not read, so that a tool
	// without migrations can open state that an application migrated.
	Migrations []migrate.Migration
	// AllowUnknownMigrations lets Open proceed when the migration log has
	// applied steps that Migrations does not contain (a downgrade).
	AllowUnknownMigrations bool

	// MaxObjectSize is the store's largest sealed object; 0 means the
	// store's default.
	MaxObjectSize int64
	// History is how many versions of each object the store keeps under
	// .cairn-state/.history/, the current one included (docs/history.md):
	// 0 means store.DefaultHistory (5), store.NoHistory (any negative
	// value) keeps none.
	History int
	// RejectRollback makes the instance's store refuse, with
	// store.ErrPutBack, an object older than a version kept in its own
	// history — an older genuine version put back under its name — on
	// Get, GetReader, GetMany and Update (store.Options.RejectRollback;
	// docs/history.md). Each such read also lists the name's history.
	RejectRollback bool
	// Logger receives the boot's progress; nil means slog.Default(). No
	// secret (identity, passphrase, plaintext) is ever logged.
	Logger *slog.Logger
	// MeterProvider, when not nil, receives the store's and the lock's
	// metrics (store.Options.MeterProvider, lock.Options.MeterProvider;
	// docs/adr/0024); nil records none.
	MeterProvider metric.MeterProvider
}

// ConfigFromEnv returns a Config from the environment:
//
//   - URL from CAIRN_STATE_URL, the backend URL (file:///abs/path,
//     file:rel/path, a path, or s3://BUCKET[/ROOT]?endpoint=…);
//   - IdentityFiles from CAIRN_STATE_IDENTITY, the path of an age identity
//     file (as written by age-keygen or `cairn-state keygen`) or of an SSH
//     private key; several paths may be given, separated by the OS path
//     list separator (':' on Unix), for example an old and a new key
//     during a rotation;
//   - Recipients from CAIRN_STATE_RECIPIENTS, extra recipients such as a
//     recovery key, separated by commas or newlines (SSH recipients
//     contain spaces);
//   - StoreID from CAIRN_STATE_STORE_ID, the store id to pin.
//
// Unset variables leave their fields empty; set the remaining fields
// (migrations, logger, …) on the result. The CLI reads the same
// variables.
func ConfigFromEnv() Config {
	var c Config
	c.URL = strings.TrimSpace(os.Getenv(setup.EnvURL))
	c.StoreID = strings.TrimSpace(os.Getenv(setup.EnvStoreID))
	for _, p := range filepath.SplitList(os.Getenv(setup.EnvIdentity)) {
		if p = strings.TrimSpace(p); p != "" {
			c.IdentityFiles = append(c.IdentityFiles, p)
		}
	}
	c.Recipients = setup.SplitRecipients(os.Getenv(setup.EnvRecipients))
	return c
}
