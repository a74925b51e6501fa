// Package storeadmin is the store's administration, for cairn-state's own
// packages: the reserved-name view the lock and the migration log are
// written through, the manifest's commit and rebinding,
// the backend below and its clock. An application uses the *store.Store it
// is given and never needs these (docs/adr/0050).
package storeadmin

import (
	"context"
	"io"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/storehook"
	"github.com/cairnhq/state/internal/storemeta"
	"github.com/cairnhq/state/store"
)

var ops = storehook.Get[*store.Store, storemeta.Manifest, store.Keys]()

// Internal returns a view of s that also accepts the reserved names
// starting with '.' (the lock, the migration log) and shows them in List.
// The view keeps s's fences.
func Internal(s *store.Store) *store.Store { return ops.Internal(s) }

// Rebind returns s sealed for manifest m with keys: the same store moving
// to another recipient set and generation, as a rekey does. Nothing is
// written until CommitManifest.
func Rebind(s *store.Store, m storemeta.Manifest, keys store.Keys) (*store.Store, error) {
	return ops.Rebind(s, m, keys)
}

// CommitManifest writes the manifest s is bound to, if .store does not
// already hold it (a new store on a backend without conditional writes,
// under the lock; a rebound store). A .store that changed meanwhile fails
// with store.ErrManifestChanged and nothing is written.
func CommitManifest(ctx context.Context, s *store.Store) error { return ops.CommitManifest(s, ctx) }

// RecordMigrationLog records in s's manifest that the migration log exists,
// one generation up (docs/adr/0033).
func RecordMigrationLog(ctx context.Context, s *store.Store) error {
	return ops.RecordMigrationLog(s, ctx)
}

// ManifestWritten reports whether .store holds the manifest s is bound to.
func ManifestWritten(s *store.Store) bool { return ops.ManifestWritten(s) }

// Key returns the backend key of the state object name, or a
// *storemeta.NameError.
func Key(s *store.Store, name string) (string, error) { return ops.Key(s, name) }

// KeyPrefix returns the backend key prefix under which s keeps its
// objects: "<root>/.cairn-state/", or ".cairn-state/" without a root.
func KeyPrefix(s *store.Store) string { return ops.KeyPrefix(s) }

// Backend returns the backend s writes to.
func Backend(s *store.Store) backend.Backend { return ops.Backend(s) }

// Now returns the current time on the storage's clock.
func Now(ctx context.Context, s *store.Store) (time.Time, error) { return ops.Now(s, ctx) }

// ConditionalWrites reports whether s's backend enforces the conditions of
// writes atomically.
func ConditionalWrites(s *store.Store) bool { return ops.ConditionalWrites(s) }

var (
	manifest      = storehook.Func[func(*store.Store) (storemeta.Manifest, bool)]("Manifest")
	recipientDiff = storehook.Func[func(*store.Store) storemeta.RecipientDiff]("RecipientDiff")
	reseal        = storehook.Func[func(*store.Store, context.Context, Object) (store.Info, error)]("Reseal")
	keptVersions  = storehook.Func[func(*store.Store) int]("KeptVersions")
	lastKept      = storehook.Func[func(*store.Store, context.Context, string) (store.VersionID, bool, error)]("LastKept")
	waitKeeps     = storehook.Func[func(*store.Store, context.Context, string) error]("WaitKeeps")
	root          = storehook.Func[func(*store.Store) string]("Root")
	storeID       = storehook.Func[func(*store.Store) envelope.StoreID]("StoreID")
	withFence     = storehook.Func[func(*store.Store, storehook.Fence) *store.Store]("WithFence")
	getObject     = storehook.Func[func(*store.Store, context.Context, string) (Object, error)]("GetObject")
	verify        = storehook.Func[func(*store.Store, context.Context, VerifyOptions, func(Check) error) error]("Verify")
	historyUsage  = storehook.Func[func(*store.Store, context.Context) (HistoryUsage, error)]("HistoryUsage")
	putBackOf     = storehook.Func[func(error) (current, newer store.VersionID, deleted, ok bool)]("PutBackOf")
	open          = storehook.Func[func(backend.Backend, storehook.Sealer, store.Options) (*store.Store, error)]("Open")
	storeIDTime   = storehook.Func[func(envelope.StoreID) (time.Time, bool)]("StoreIDTime")
	isHistory     = storehook.Func[func(string) bool]("IsHistoryRecord")
	validateName  = storehook.Func[func(string) error]("ValidateName")
	prepare       = storehook.Func[func(*store.Store, context.Context, string, io.Reader) (storehook.Upload, error)]("Prepare")
	putUpload     = storehook.Func[func(*store.Store, context.Context, storehook.Upload, store.PutOptions) (store.Info, error)]("PutUpload")
)

// Upload is a value sealed into a temporary file by [Prepare], to be
// written once by [PutUpload]. Close it when done; it is not safe for
// concurrent use.
type Upload = storehook.Upload

// Prepare reads r to its end and seals it for name into a temporary file
// (only the header, stamped with the write that sends it, is left for
// [PutUpload] to write): what can take long — a slow pipe — is done
// before the caller takes the lock its write needs. It fails with a
// *storemeta.NameError, with store.ErrTooLarge as soon as the sealed value is
// over the maximum object size, with an error wrapping r's when a read
// fails, and with ctx's error once ctx is done (checked between reads).
// Through a store opened with another Sealer ([Open]), the value is read
// into memory and sealed by PutUpload.
func Prepare(ctx context.Context, s *store.Store, name string, r io.Reader) (Upload, error) {
	return prepare(s, ctx, name, r)
}

// PutUpload writes u, prepared by [Prepare] on s or a view of it, as
// Store.Put writes (same conditions, fences and errors); the object is
// stamped here, by this view's fence. An Upload is written at most once: a
// second PutUpload fails.
func PutUpload(ctx context.Context, s *store.Store, u Upload, opts store.PutOptions) (store.Info, error) {
	return putUpload(s, ctx, u, opts)
}

// Sealer seals and opens one object bound to its name, for [Open];
// the envelope satisfies it.
type Sealer = storehook.Sealer

// Open returns a store over b that seals with s, without a manifest (the
// store of tests and of tools that bring their own sealer; applications
// use store.Connect). It touches no storage; it fails only for a nil
// backend or sealer, an invalid Options.Root (store.ErrInvalidRoot), or a
// MeterProvider that refuses the store's instruments.
func Open(b backend.Backend, s Sealer, opts store.Options) (*store.Store, error) {
	return open(b, s, opts)
}

// StoreID returns the id s's objects are bound to (store.Store.StoreID's,
// as the envelope's type); zero for a store without a manifest.
func StoreID(s *store.Store) envelope.StoreID { return storeID(s) }

// Root returns the store's normalized root prefix ("" when none).
func Root(s *store.Store) string { return root(s) }

// StoreIDTime returns the creation time a store id made by package store
// carries in its first 6 bytes. It is not authenticated when the id was
// only peeked from an object, and it is meaningless for ids made
// otherwise (envelope.NewStoreID): ok is false when the time is not
// between 2020 and a day from now.
func StoreIDTime(id envelope.StoreID) (t time.Time, ok bool) { return storeIDTime(id) }

// IsHistoryRecord reports an internal state name that is one of
// history's own records — a tombstone — rather than a
// kept version (which is sealed as its object was).
func IsHistoryRecord(internal string) bool { return isHistory(internal) }

// ValidateName reports whether name is a valid state name for applications:
// non-empty UTF-8 of at most store.MaxNameLen bytes, made of '/'-separated
// segments, none of them empty, "." or "..", not starting with '/', with no
// control character and no backslash, not looking like a secret, and not
// starting with '.' (reserved for cairn-state's own objects). Every store
// operation checks it; the error is a *storemeta.NameError.
func ValidateName(name string) error { return validateName(name) }

// Manifest returns the store's manifest, as read (or made) by
// store.Connect and since rewritten through this connection; ok is false
// for a store without one (keyless, recovery-only, or opened with [Open]).
func Manifest(s *store.Store) (m storemeta.Manifest, ok bool) { return manifest(s) }

// RecipientDiff reports how the recipients of the keys the store was
// connected with differ from the store's recipient set (empty without a
// manifest). Writers seal to the store's set whatever the difference:
// reconcile it with a rekey.
func RecipientDiff(s *store.Store) storemeta.RecipientDiff { return recipientDiff(s) }

// Reseal writes obj's value back sealed to the store's current recipients
// and manifest generation, keeping the epoch and sequence of the write
// that made it (its version id, ADR 0040 §8), conditional on obj's
// version where the storage has conditional writes, and keeping nothing
// in history. obj comes from [GetObject] on the same view: through the
// [Internal] view a kept version is re-sealed bound to the name it is a
// version of, as it was. It is what a rekey writes: a re-sealed kept
// version must not become newer than its current object (which would read
// as a put-back), nor a re-sealed current object change its id. A fenced
// view's fences admit it as any write.
func Reseal(ctx context.Context, s *store.Store, obj Object) (store.Info, error) {
	return reseal(s, ctx, obj)
}

// KeptVersions returns how many versions of each name a write through a
// fenced view keeps (store.Options.History resolved); 0 when history is
// off.
func KeptVersions(s *store.Store) int { return keptVersions(s) }

// WaitKeeps waits until no keep that a write through s's connection left
// behind it (docs/adr/0065) is in flight; it fails only with ctx's error.
func WaitKeeps(ctx context.Context, s *store.Store) error { return waitKeeps(s, ctx, "") }

// LastKept returns the newest kept content version of name (what `rm`
// tells the user to restore), from one listing of its history; ok is
// false when none is kept.
func LastKept(ctx context.Context, s *store.Store, name string) (id store.VersionID, ok bool, err error) {
	return lastKept(s, ctx, name)
}

// Fence, Holder and HolderInfo are how a store is fenced: what a fence
// reports and admits, and who holds it (storehook documents each).
type (
	Fence      = storehook.Fence
	Holder     = storehook.Holder
	HolderInfo = storehook.HolderInfo
)

// WithFence returns a view of s whose writes (Put, Delete, Update and
// the JSON helpers) fail with an error wrapping store.ErrFenced and f.Err()
// once f.Err() is non-nil. Reads are unaffected. Fences accumulate: a view
// of a fenced view checks both. A nil f returns s itself. Package lock
// fences a store with its lock this way (lock.Lock.Fence).
//
// Each write checks the fence before sealing, is admitted by it (Enter)
// right before its request, and runs under a context deadline at
// f.Deadline() (the end of the lock's lease), so a write cannot be sent,
// or retried, after the lock may have passed to another instance; a write
// cut off by the deadline fails with store.ErrFenced and an error that
// says it may still have landed.
//
// On storage with conditional writes every write of a fenced view is
// conditional on the object's version as the view knows it (docs/adr/0026):
// the version it last read, listed or wrote through a view fenced by the
// same fences, absent when it read it absent, and a stat before the write
// when it knows nothing. A write that the server applies late, after
// another holder wrote the object, then fails instead of replacing the
// other's value. Writes that carry conditions of their own keep them. On
// storage without conditions (Garage) a request the server applies after
// the client cut it off is the one thing the fence cannot recall
// (docs/lock.md gives the window). The lock itself writes through the
// unfenced store it was given.
func WithFence(s *store.Store, f Fence) *store.Store { return withFence(s, f) }

// Object is one object read whole and opened, with its sealed bytes and
// what the envelope learnt opening it.
type Object = storehook.Object[store.Info]

// GetObject reads and opens one object of s as Get does, and also returns
// its sealed bytes and what the envelope learnt about it: what verify and
// rekey need. Its errors are Get's.
func GetObject(ctx context.Context, s *store.Store, name string) (Object, error) {
	return getObject(s, ctx, name)
}

// VerifyOptions configure [Verify]; Check is its verdict on one object
// (storehook documents their fields).
type (
	VerifyOptions = storehook.VerifyOptions[store.ManyOptions]
	Check         = storehook.Check[store.Info]
)

// Verify opens every object of s, its reserved ones (the manifest, the
// lock's, the migration log) included, and hands each verdict to fn, one
// call at a time, in no particular order: `cairn-state verify`. History's
// kept versions are judged first, so that every current object is judged
// against the authenticated stamps its history keeps (a put-back object,
// Check.PutBack). Objects that vanish between the listing and the read
// are not reported. Reads are bounded as GetMany's are; an object's sealed
// bytes are let go once fn returns. An error from fn stops the run and is
// returned; so is a listing error or ctx's.
func Verify(ctx context.Context, s *store.Store, o VerifyOptions, fn func(Check) error) error {
	return verify(s, ctx, o, fn)
}

// PutBackOf returns the versions a put-back error (store.ErrPutBack, as
// Check.PutBack or a read under Options.RejectRollback reports it) names:
// the version the object holds and the newer one its history keeps,
// deleted when that one is a tombstone. ok is false for another error.
func PutBackOf(err error) (current, newer store.VersionID, deleted, ok bool) {
	return putBackOf(err)
}

// HistoryUsage is what history holds, from one listing.
type HistoryUsage = storehook.HistoryUsage

// HistoryUsageOf counts what s's history holds, from one listing of
// .cairn-state/.history/ (a page per 1,000 objects on S3).
func HistoryUsageOf(ctx context.Context, s *store.Store) (HistoryUsage, error) {
	return historyUsage(s, ctx)
}
