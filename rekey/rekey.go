// Package rekey moves a cairn-state store to a new recipient set: it
// rewrites the store's manifest (.cairn-state/.store) to record the new
// set, then re-seals every object to it, under the instance lock,
// resumable after any interruption, SIGKILL included (docs/adr/0022).
//
// A key rotation from Go:
//
//	res, err := rekey.Run(ctx, b, &rekey.Options{
//		Identities:    []age.Identity{newKey},
//		OldIdentities: []age.Identity{oldKey},
//		Root:          "apps/one",
//	})
//
// Afterwards the old key no longer belongs to the store: store.Connect
// (and state.Open) refuse it with store.ErrNotMember.
//
// # Order
//
// The manifest is written first, then the objects. At every point an
// object is sealed either to the old set or to the new one, each write
// being atomic, so the old and new keys together open everything; from
// the manifest's write on, writers seal to the new set and an identity of
// the old set alone is refused before it can write. An interrupted run
// leaves a progress record (.cairn-state/.rekey, sealed like all state);
// the same call continues from it.
package rekey

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"filippo.io/age"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/envelope"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// ProgressName is the reserved state name of the progress record.
const ProgressName = ".rekey"

// progressVersion is the version of the progress record's JSON.
const progressVersion = 2

// Defaults of Options.
const (
	// DefaultCheckpointEvery is how many re-sealed objects a run may redo
	// after an interruption, at most.
	DefaultCheckpointEvery = 64
	// DefaultCheckpointInterval is how much work time a run may redo
	// after an interruption, at most.
	DefaultCheckpointInterval = 2 * time.Second
)

// Options configure [Run]. Identities is required.
type Options struct {
	// Identities are the writer identities of the new set: it is their
	// recipients plus Recipients. They also open objects.
	Identities []age.Identity
	// Recipients are extra recipients of the new set (a recovery key).
	Recipients []age.Recipient
	// OldIdentities open objects (and the manifest) but are not sealed
	// to: the keys being retired.
	OldIdentities []age.Identity
	// Recovery identities are the emergency opt-in: objects of the
	// application (names not starting with '.') that no identity
	// authenticates are opened through them and re-sealed, authenticated
	// from then on — they may be forgeries, so Result.Unauthenticated lists
	// them; run with DryRun first to see them. Reserved objects are never
	// opened through them: those that open with no other key are left as
	// they are (Result.ReservedLeft). When no identity opens the manifest
	// either (only the recovery key survives), a new manifest is written
	// for the store id its header carries.
	Recovery []age.Identity
	// DryRun reads every object and writes nothing, the lock included:
	// Result says what a run would re-seal.
	DryRun bool
	// Restart ignores the progress record of an interrupted run.
	Restart bool

	// Root and MaxObjectSize are the store's options (store.Options).
	Root          string
	MaxObjectSize int64

	// Acquire takes the instance lock on the store it is given; nil means
	// lock.Acquire with Lock.
	Acquire func(ctx context.Context, st *store.Store) (*lock.Lock, error)
	// Lock are the lock's options when Acquire is nil.
	Lock lock.Options
	// StaleAfter is the stale window used to judge whether the lock found
	// before acquiring was the interrupted run's; 0 means the lock's
	// default.
	StaleAfter time.Duration

	// Progress, when not nil, is called before the first object (Done 0)
	// and after each one, from the goroutine that called Run; it may block
	// (the lock's heartbeat goes on).
	Progress func(Progress)
	// CheckpointEvery and CheckpointInterval bound the work an
	// interruption can cost: the progress record is saved after that many
	// re-sealed objects or that much time, whichever comes first. Zero
	// means the defaults.
	CheckpointEvery    int
	CheckpointInterval time.Duration

	// Logger receives warnings and progress (names only, never values);
	// nil means slog.Default().
	Logger *slog.Logger
}

// Progress is how far a run got.
type Progress struct {
	// Total is the number of objects to go through (the lock's own, the
	// manifest and the progress record excluded).
	Total int
	// Done counts the objects gone through: Resealed + Skipped (+ those
	// left, ReservedLeft).
	Done int
	// Resealed counts the objects this run re-sealed (or, with DryRun,
	// would re-seal).
	Resealed int
	// Skipped counts the objects an interrupted run had re-sealed.
	Skipped int
	// Resumed is set, on the first call, when the run continues an
	// interrupted one.
	Resumed *Resumed
}

// Resumed describes the interrupted run a run continues.
type Resumed struct {
	StartedAt  time.Time
	InstanceID string
	Done       int
	Total      int
}

// Result is what a run did.
type Result struct {
	// Listed reports that the run got as far as listing the objects.
	Listed bool
	// Total, Done, Resealed and Skipped count as in Progress.
	Total, Done, Resealed, Skipped int
	// Resumed reports that the run continued an interrupted one.
	Resumed bool
	// Manifest is the store's manifest after the run (with DryRun, the
	// one a run would write).
	Manifest store.Manifest
	// PreviousGeneration is the key generation before the run (0 when it
	// could not be read: a recovery, or a store without a manifest).
	PreviousGeneration uint64
	// Unauthenticated names the objects opened through a recovery
	// identity (and re-sealed, unless DryRun).
	Unauthenticated []string
	// ReservedLeft names the reserved objects that only a recovery
	// identity could have opened: they were not re-sealed.
	ReservedLeft []string
	// Lock is the record of the lock the run held (zero with DryRun).
	Lock lock.Record
	// Elapsed is how long the run took.
	Elapsed time.Duration
}

// progressRecord is the progress record: every object whose name is ≤
// After (in lexical order) and that was not written after the record was
// saved has been re-sealed to the recipient set Target names.
type progressRecord struct {
	Version    int       `json:"version"`
	Target     string    `json:"target"`
	After      string    `json:"after"`
	Done       int       `json:"done"`
	Total      int       `json:"total"`
	StartedAt  time.Time `json:"started_at"`
	InstanceID string    `json:"instance_id"`
	// Epoch and AcquisitionID are those of the lock the saving run held.
	Epoch         uint64 `json:"epoch"`
	AcquisitionID string `json:"acquisition_id"`
}

// ErrManifestChanged means the store's manifest changed while the run
// waited for the lock (another rekey ran): nothing was re-sealed; run
// again. It is store.ErrManifestChanged.
var ErrManifestChanged = store.ErrManifestChanged

// Run moves the store of b (under opts.Root) to the recipient set of
// opts.Identities and opts.Recipients, as the package doc says. It holds
// the instance lock throughout (acquired with opts.Acquire) and releases it
// before returning. On error, Result says how far the run got; the same
// call resumes. Errors: the store's (store.ErrNotMember when no identity
// opens the manifest, store.ErrBadManifest), the lock's (lock.ErrHeld),
// an object that opens with none of the identities (store.ErrUnreadable,
// wrapping the envelope's reason, naming it), ErrManifestChanged, and
// ctx's.
func Run(ctx context.Context, b backend.Backend, opts *Options) (Result, error) {
	start := time.Now()
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.CheckpointEvery <= 0 {
		o.CheckpointEvery = DefaultCheckpointEvery
	}
	if o.CheckpointInterval <= 0 {
		o.CheckpointInterval = DefaultCheckpointInterval
	}
	if len(o.Identities) == 0 {
		return Result{}, fmt.Errorf("rekey: %w: the new set needs at least one identity", envelope.ErrInvalidIdentity)
	}
	target, err := targetSet(o)
	if err != nil {
		return Result{}, err
	}
	sopts := store.Options{Root: o.Root, MaxObjectSize: o.MaxObjectSize, Logger: o.Logger}
	keys := store.Keys{Identities: append(slices.Clone(o.Identities), o.OldIdentities...), Recovery: o.Recovery}

	st, err := store.Connect(ctx, b, keys, &store.ConnectOptions{Create: !o.DryRun, Options: sopts})
	recovering := false
	if errors.Is(err, store.ErrNotMember) && len(o.Recovery) > 0 {
		// Only a recovery key opens the store: its manifest cannot be
		// authenticated, so it is rebuilt from the store id its header
		// carries and the new set.
		st, err = store.Connect(ctx, b, store.Keys{Recovery: o.Recovery}, &store.ConnectOptions{Options: sopts})
		recovering = err == nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("rekey: %w", err)
	}
	var res Result
	cur, has := st.Manifest()
	next := cur
	switch {
	case has:
		res.PreviousGeneration = cur.Generation
		if !slices.Equal(cur.Recipients, target) {
			next.Recipients, next.Generation = target, cur.Generation+1
		}
	case recovering && !st.StoreID().IsZero():
		created, ok := store.StoreIDTime(st.StoreID())
		if !ok {
			created = time.Now().UTC().Truncate(time.Millisecond)
		}
		next = store.Manifest{ID: st.StoreID(), Format: store.FormatLegacy, Created: created, Recipients: target, Generation: 1}
		o.Logger.Warn("rekey: no identity opens the store's manifest; writing a new one for the store id its header carries, with the new recipients",
			"store_id", next.ID)
	case o.DryRun:
		// A store without a manifest, read as it is.
	default:
		return Result{}, fmt.Errorf("rekey: %w", store.ErrNoManifest)
	}
	res.Manifest = next

	if o.DryRun {
		err := (&run{o: o, st: st.Internal(), res: &res}).objects(ctx, nil)
		res.Elapsed = time.Since(start)
		return res, err
	}

	moved, err := st.Rebind(next, keys)
	if err != nil {
		return Result{}, fmt.Errorf("rekey: %w", err)
	}
	// The lock about to be replaced: if it is the interrupted run's own,
	// nobody held the lock since that run last saved its progress.
	var replacing string
	if before, err := lock.Inspect(ctx, moved, &lock.InspectOptions{StaleAfter: o.StaleAfter}); err == nil && before.Readable {
		replacing = before.Record.AcquisitionID
	}
	acquire := o.Acquire
	if acquire == nil {
		acquire = func(ctx context.Context, st *store.Store) (*lock.Lock, error) {
			lo := o.Lock
			if lo.Logger == nil {
				lo.Logger = o.Logger
			}
			return lock.Acquire(ctx, st, lo)
		}
	}
	l, err := acquire(ctx, moved)
	if err != nil {
		return res, fmt.Errorf("rekey: %w", err)
	}
	res.Lock = l.Record()
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if rerr := l.Release(rctx); rerr != nil {
			o.Logger.Warn("rekey: releasing the lock", "err", rerr)
		}
	}()
	// The work stops when the lock is lost, as well as when ctx ends.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(l.Context(), cancel)
	defer stop()
	fenced := moved.WithFence(l)

	// 1. The manifest: from here on writers seal to the new set, and the
	// old set alone is refused.
	if err := fenced.CommitManifest(wctx); err != nil {
		return res, lockErr(l, fmt.Errorf("rekey: %w", err))
	}
	// 2. The objects.
	r := &run{o: o, st: fenced.Internal(), res: &res, l: l, replacing: replacing,
		target: fingerprint(next)}
	if err := r.objects(wctx, l); err != nil {
		return res, lockErr(l, err)
	}
	// 3. Every object is bound now: legacy objects are refused from here on.
	if next.Format == store.FormatLegacy && len(res.ReservedLeft) == 0 {
		bound := next
		bound.Format = store.FormatBound
		final, err := moved.Rebind(bound, keys)
		if err == nil {
			err = final.WithFence(l).CommitManifest(wctx)
		}
		if err != nil {
			return res, lockErr(l, fmt.Errorf("rekey: recording that every object is bound: %w", err))
		}
		res.Manifest = bound
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// lockErr adds the lock's loss to an error made while it was being lost.
func lockErr(l *lock.Lock, err error) error {
	if lerr := l.Err(); lerr != nil && !errors.Is(err, lock.ErrLost) {
		return fmt.Errorf("%w (%w)", err, lerr)
	}
	return err
}

// targetSet is the sorted text forms of the new set.
func targetSet(o Options) ([]string, error) {
	env, err := envelope.New(o.Identities, o.Recipients, &envelope.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, fmt.Errorf("rekey: %w", err)
	}
	return env.Recipients(), nil
}

// fingerprint names the recipient set a progress record is for: the store,
// its generation and its recipients.
func fingerprint(m store.Manifest) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s\n%d\n%s", m.ID, m.Generation, strings.Join(m.Recipients, "\n"))))
	return hex.EncodeToString(h[:])
}

// run is one pass over the objects.
type run struct {
	o         Options
	st        *store.Store // internal view (fenced, except in a dry run)
	res       *Result
	l         *lock.Lock // nil in a dry run
	replacing string
	target    string

	prog     progressRecord
	lastSave time.Time
}

// reservedSkip reports the names a rekey never re-seals: the lock's own
// (the lock rewrites them, sealed by the run's store), the manifest and
// the progress record.
func reservedSkip(name string) bool {
	return lock.Owns(name) || name == store.ManifestName || name == ProgressName
}

func (r *run) objects(ctx context.Context, l *lock.Lock) error {
	var objs []store.Info
	var progInfo store.Info
	havePrev := false
	err := r.st.List(ctx, "", func(i store.Info) error {
		switch {
		case i.Name == ProgressName:
			progInfo, havePrev = i, true
		case reservedSkip(i.Name):
		default:
			objs = append(objs, i)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("rekey: %w", err)
	}
	slices.SortFunc(objs, func(x, y store.Info) int { return strings.Compare(x.Name, y.Name) })
	res := r.res
	res.Listed, res.Total = true, len(objs)

	var rec lock.Record
	if l != nil {
		rec = l.Record()
	}
	r.prog = progressRecord{Version: progressVersion, Target: r.target, Total: res.Total,
		StartedAt: time.Now().UTC(), InstanceID: rec.InstanceID, Epoch: rec.Epoch, AcquisitionID: rec.AcquisitionID}
	var prev *progressRecord
	if havePrev && !r.o.Restart && l != nil {
		prev = r.loadProgress(ctx)
	}
	// done reports whether the interrupted run re-sealed o. If this run's
	// lock directly replaced that run's (the record found before acquiring
	// was the interrupted run's acquisition, and the epoch grew by exactly
	// one), no other instance held the lock in between, so every name up
	// to the cursor is done. Otherwise (the interrupted run released its
	// lock, or someone took it over) another writer may have written
	// meanwhile: only objects last written before the progress record count
	// as done (strictly before: storage clocks may tick in whole seconds).
	direct := prev != nil && prev.AcquisitionID != "" && r.replacing == prev.AcquisitionID && rec.Epoch == prev.Epoch+1
	done := func(o store.Info) bool {
		if prev == nil || o.Name > prev.After {
			return false
		}
		return direct || o.ModTime.Before(progInfo.ModTime)
	}
	first := Progress{Total: res.Total}
	if prev != nil {
		res.Resumed = true
		r.prog.StartedAt = prev.StartedAt
		first.Resumed = &Resumed{StartedAt: prev.StartedAt, InstanceID: prev.InstanceID, Done: prev.Done, Total: prev.Total}
	}
	r.report(first)

	for _, o := range objs {
		if done(o) {
			res.Skipped++
		} else {
			resealed, err := r.reseal(ctx, o.Name)
			if err != nil {
				if l != nil {
					// Keep what was done: the next run continues from here.
					if serr := r.saveProgress(context.WithoutCancel(ctx)); serr != nil {
						r.o.Logger.Warn("rekey: saving progress", "err", serr)
					}
				}
				return err
			}
			if resealed {
				res.Resealed++
			}
		}
		res.Done++
		r.prog.After, r.prog.Done = o.Name, res.Done
		if l != nil && res.Resealed > 0 && (res.Resealed%r.o.CheckpointEvery == 0 || time.Since(r.lastSave) >= r.o.CheckpointInterval) {
			if err := r.saveProgress(ctx); err != nil {
				return err
			}
		}
		r.report(Progress{Total: res.Total, Done: res.Done, Resealed: res.Resealed, Skipped: res.Skipped})
	}
	if l != nil && (havePrev || !r.lastSave.IsZero()) {
		if err := r.st.Delete(ctx, ProgressName, store.DeleteOptions{}); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("rekey: removing the progress record: %w", err)
		}
	}
	return nil
}

func (r *run) report(p Progress) {
	if r.o.Progress != nil {
		r.o.Progress(p)
	}
}

// reseal opens one object and writes it back sealed to the new set, only
// if it did not change meanwhile where the backend can tell. It reports
// false for an object removed since the listing and for a reserved one
// left as it is.
func (r *run) reseal(ctx context.Context, name string) (bool, error) {
	obj, err := r.st.GetObject(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil // removed since the listing
	}
	if err != nil {
		if ctx.Err() != nil {
			return false, err
		}
		if len(r.o.Recovery) > 0 && strings.HasPrefix(name, ".") &&
			(errors.Is(err, envelope.ErrNoIdentity) || errors.Is(err, envelope.ErrUnauthenticated)) {
			// Never through a recovery identity (issue #14): left as it is.
			r.res.ReservedLeft = append(r.res.ReservedLeft, name)
			r.o.Logger.Warn("rekey: left a reserved object that no identity authenticates; reserved objects never open through a recovery identity", "object", name)
			return false, nil
		}
		return false, fmt.Errorf("rekey: %w", err) // it names the object
	}
	if obj.Opened.Unauthenticated {
		r.res.Unauthenticated = append(r.res.Unauthenticated, name)
	}
	if r.o.DryRun {
		return true, nil
	}
	var opts store.PutOptions
	if r.st.ConditionalWrites() {
		opts.IfVersion = obj.Info.Version
	}
	if _, err := r.st.Put(ctx, name, obj.Data, opts); err != nil {
		if errors.Is(err, store.ErrPreconditionFailed) {
			return false, fmt.Errorf("rekey: %q changed while it was being re-sealed (is another writer ignoring the lock?); run rekey again: %w", name, err)
		}
		return false, fmt.Errorf("rekey: %w", err)
	}
	return true, nil
}

// loadProgress returns the interrupted run's record if it is for the same
// recipient set, and nil otherwise.
func (r *run) loadProgress(ctx context.Context) *progressRecord {
	data, _, err := r.st.Get(ctx, ProgressName)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		r.o.Logger.Warn("rekey: the interrupted run's progress record does not open; starting over", "err", err)
		return nil
	}
	var p progressRecord
	if err := json.Unmarshal(data, &p); err != nil || p.Version != progressVersion {
		r.o.Logger.Warn("rekey: the interrupted run's progress record is not understood; starting over")
		return nil
	}
	if p.Target != r.target {
		r.o.Logger.Warn("rekey: an interrupted rekey to another recipient set was found; starting over")
		return nil
	}
	return &p
}

func (r *run) saveProgress(ctx context.Context) error {
	data, err := json.Marshal(r.prog)
	if err != nil {
		return err
	}
	if _, err := r.st.Put(ctx, ProgressName, data, store.PutOptions{}); err != nil {
		return fmt.Errorf("rekey: saving progress: %w", err)
	}
	r.lastSave = time.Now()
	return nil
}
