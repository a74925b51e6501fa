// Package rekey moves a cairn-state store to a new recipient set: it
// rewrites the store's manifest (.cairn-state/.store) to record the new
// set, then re-seals every object to it, under the instance lock,
// resumable after any interruption, SIGKILL included (docs/adr/0022).
//
// A key rotation from Go:
//
//	res, err := rekey.Run(ctx, b, rekey.Options{
//		Identities:    []age.Identity{newKey},
//		OldIdentities: []age.Identity{oldKey},
//		Root:          "apps/one",
//	})
//
// Afterwards the old key no longer belongs to the store: store.Connect
// (and state.Open) refuse it with store.ErrNotMember. A run that moves the
// store to another set raises the manifest's generation, which every object
// re-sealed by it carries: a manifest from before the run put back by
// someone who can write the bucket is refused as soon as one of those
// objects is read (store.ErrRolledBack).
//
// # What a rotation does not undo
//
// A rekey re-authenticates what the keys it is given authenticate. If a
// retired key leaked, whoever holds it could have forged or rewritten any
// object before the run: the run opens it with the old key and re-seals
// it under the new set, and from then on it verifies as genuine.
// Result.Reauthenticated names the objects that only a retired key
// authenticated. Before rotating away from a leaked key, run verify with
// the new identities only (objects the leaked key wrote then show as
// unauthenticated), or compare the values with a recovery export taken
// before the leak, and restore what differs.
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
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"filippo.io/age"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/boot"
	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/lockadmin"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/storemeta"
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
	// Restart ignores the progress record of an interrupted run and
	// re-seals every object, those already sealed to the new set too.
	Restart bool
	// ResumeCommand, when not empty, is recorded in the progress record
	// of the run: the command that resumes it if it is interrupted, for
	// tools that read the record ([ReadProgress]) to show. It is stored
	// sealed, like the record; it must hold no secret.
	ResumeCommand string

	// Root and MaxObjectSize are the store's options (store.Options).
	Root          string
	MaxObjectSize int64
	// StoreID, when not empty, pins the store (store.ConnectOptions.StoreID):
	// another store is refused before anything is read or written.
	StoreID string
	// Location names the store in messages (store.ConnectOptions.Location).
	Location string

	// Acquire takes the instance lock on the store it is given; nil means
	// lock.Acquire with Lock, in the lock mode the store records.
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
	// Checking reports the look a run takes, before it writes anything,
	// when the recipient set is already the store's: it reads every object
	// to find whether one needs re-sealing at all. A run that finds none
	// ends there (Result.NothingToChange); otherwise the re-sealing pass
	// follows, its progress reported from Done 0 again.
	Checking bool
	// Total is the number of objects to go through (the lock's own, the
	// manifest and the progress record excluded).
	Total int
	// Done counts the objects gone through: Resealed + Skipped + UpToDate
	// (+ those left, ReservedLeft).
	Done int
	// Resealed counts the objects this run re-sealed (or, with DryRun or
	// while Checking, would re-seal).
	Resealed int
	// Skipped counts the objects an interrupted run had re-sealed.
	Skipped int
	// UpToDate counts the objects found already sealed to the new set
	// (bound to the store, authenticated) and left as they were; none
	// with Options.Restart.
	UpToDate int
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
	// NothingToChange reports a run that found the store and every
	// object already sealed to the new set, with no interrupted run to
	// finish: it wrote nothing, not even the lock.
	NothingToChange bool
	// Total, Done, Resealed, Skipped and UpToDate count as in Progress.
	Total, Done, Resealed, Skipped, UpToDate int
	// Resumed reports that the run continued an interrupted one.
	Resumed bool
	// Manifest is the store's manifest after the run (with DryRun, the
	// one a run would write).
	Manifest storemeta.Manifest
	// PreviousGeneration is the manifest's generation before the run (for
	// a recovery, the one the manifest's header claims).
	PreviousGeneration uint64
	// Unauthenticated names the objects opened through a recovery
	// identity (and re-sealed, unless DryRun).
	Unauthenticated []string
	// ReservedLeft names the reserved objects that only a recovery
	// identity could have opened: they were not re-sealed.
	ReservedLeft []string
	// Reauthenticated names the objects that were authenticated only by
	// an identity of OldIdentities and are now sealed and authenticated
	// under the new set: if a retired key leaked, any of them may be a
	// forgery made with it, and the rotation has made it look genuine
	// (see the package doc for what to check).
	Reauthenticated []string
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
	// Resume is Options.ResumeCommand.
	Resume string `json:"resume,omitempty"`
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
func Run(ctx context.Context, b backend.Backend, o Options) (Result, error) {
	start := time.Now()
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

	copts := store.ConnectOptions{Options: sopts, StoreID: o.StoreID, Location: o.Location}
	st, err := store.Connect(ctx, b, keys, copts)
	recovering := false
	if errors.Is(err, store.ErrNotMember) && len(o.Recovery) > 0 {
		// Only a recovery key opens the store: its manifest cannot be
		// authenticated, so it is rebuilt from the store id its header
		// carries and the new set.
		st, err = store.Connect(ctx, b, store.Keys{Recovery: o.Recovery}, copts)
		recovering = err == nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("rekey: %w", err)
	}
	var res Result
	cur, has := storeadmin.Manifest(st)
	next := cur
	switch {
	case has:
		res.PreviousGeneration = cur.Generation
		next.Recipients = target
		// A run that moves the store to another set (or starts over,
		// Restart) raises the generation: every object it re-seals names
		// the new one, and the manifest from before it, put back, is
		// refused at the first read. A run to the set the manifest already
		// records — nothing to change, or the completion of an interrupted
		// run that committed it — keeps it.
		if o.Restart || !slices.Equal(cur.Recipients, target) {
			next.Generation = cur.Generation + 1
		}
	case recovering:
		// The manifest cannot be read: rebuild it for the store id and
		// above the generation its header claims, so that every object
		// re-sealed by this run is of a newer generation than any before.
		res.PreviousGeneration = claimedGeneration(ctx, st)
		created, ok := storeadmin.StoreIDTime(storeadmin.StoreID(st))
		if !ok {
			created = time.Now().UTC().Truncate(time.Millisecond)
		}
		caps := storeadmin.Backend(st).Capabilities()
		mode := storemeta.LockModeClaims
		if caps.ConditionalWrites {
			mode = storemeta.LockModeCAS
		}
		next = storemeta.Manifest{ID: storeadmin.StoreID(st), Created: created, Recipients: target, Generation: res.PreviousGeneration + 1,
			LockMode: mode, Storage: "rebuilt by a rekey through a recovery identity; " + caps.Evidence, CopySourceConditions: caps.CopySourceConditions}
		o.Logger.Warn("rekey: no identity opens the store's manifest; writing a new one for the store id its header carries, with the new recipients",
			"store_id", next.ID, "generation", next.Generation)
	default:
		return Result{}, fmt.Errorf("rekey: %w", store.ErrNoManifest)
	}
	res.Manifest = next

	if has && !recovering && len(o.Recovery) == 0 && !o.Restart && slices.Equal(cur.Recipients, target) {
		// The set is already the store's: look before writing anything,
		// the lock included. Writers seal to the store's set under its
		// generation, so what is found current stays current. A store
		// with nothing to change keeps its generation: nothing is
		// written.
		look := Result{Manifest: cur, PreviousGeneration: res.PreviousGeneration}
		lo := o
		lo.DryRun = true
		pre := &run{o: lo, st: storeadmin.Internal(st), res: &look, checking: true}
		if err := pre.objects(ctx, nil); err != nil {
			return look, err
		}
		if look.Resealed == 0 && !pre.sawProgress {
			look.NothingToChange = true
			look.Elapsed = time.Since(start)
			return look, nil
		}
	}

	// A run that raises the generation re-seals every object not already
	// sealed under the new one; one that keeps it, every object not sealed
	// to the set.
	var gen uint64
	if next.Generation != res.PreviousGeneration || recovering {
		gen = next.Generation
	}
	if o.DryRun {
		err := (&run{o: o, st: storeadmin.Internal(st), res: &res, old: oldOnly(o, target), gen: gen}).objects(ctx, nil)
		res.Elapsed = time.Since(start)
		return res, err
	}

	moved, err := storeadmin.Rebind(st, next, keys)
	if err != nil {
		return Result{}, fmt.Errorf("rekey: %w", err)
	}
	// The lock about to be replaced: if it is the interrupted run's own,
	// nobody held the lock since that run last saved its progress.
	var replacing string
	if before, err := lockadmin.Inspect(ctx, moved, lockadmin.InspectOptions{StaleAfter: o.StaleAfter}); err == nil && before.Readable {
		replacing = before.Record.AcquisitionID
	}
	acquire := o.Acquire
	if acquire == nil {
		acquire = func(ctx context.Context, st *store.Store) (*lock.Lock, error) {
			lo := o.Lock
			if lo.Logger == nil {
				lo.Logger = o.Logger
			}
			return boot.Acquire(ctx, st, boot.Options{Lock: lo})
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
	fenced := l.Fence(moved)

	// 1. The manifest: from here on writers seal to the new set, and the
	// old set alone is refused.
	if err := storeadmin.CommitManifest(wctx, fenced); err != nil {
		return res, lockErr(l, fmt.Errorf("rekey: %w", err))
	}
	// 2. The objects.
	r := &run{o: o, st: storeadmin.Internal(fenced), res: &res, l: l, replacing: replacing,
		target: fingerprint(next), old: oldOnly(o, target), gen: gen}
	if err := r.objects(wctx, l); err != nil {
		return res, lockErr(l, err)
	}
	if len(res.Reauthenticated) > 0 {
		o.Logger.Warn("rekey: objects only a retired key authenticated are now authenticated under the new set; "+
			"if that key leaked, check them against a recovery export taken before the leak",
			"objects", len(res.Reauthenticated))
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
	env, err := envelope.New(o.Identities, o.Recipients, envelope.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, fmt.Errorf("rekey: %w", err)
	}
	return env.Recipients(), nil
}

// claimedGeneration is the generation the header of the store's manifest
// claims, unauthenticated; 0 when it cannot be read.
func claimedGeneration(ctx context.Context, st *store.Store) uint64 {
	key, err := storeadmin.Key(storeadmin.Internal(st), storemeta.ManifestName)
	if err != nil {
		return 0
	}
	rc, _, err := storeadmin.Backend(st).Get(ctx, key)
	if err != nil {
		return 0
	}
	defer rc.Close()
	sealed, err := io.ReadAll(io.LimitReader(rc, envelope.MaxSize))
	if err != nil {
		return 0
	}
	hdr, err := envelope.PeekHeader(storemeta.ManifestName, sealed)
	if err != nil {
		return 0
	}
	return hdr.Stamp.Generation
}

// oldOnly returns the recipients of the old identities that are not in
// the new set: the retired keys.
func oldOnly(o Options, target []string) map[string]bool {
	old := map[string]bool{}
	for _, id := range o.OldIdentities {
		r, err := envelope.RecipientOf(id)
		if err != nil {
			continue
		}
		if t, err := envelope.RecipientString(r); err == nil {
			if _, in := slices.BinarySearch(target, t); !in {
				old[t] = true
			}
		}
	}
	return old
}

// fingerprint names the recipient set a progress record is for: the store,
// its generation and its recipients.
func fingerprint(m storemeta.Manifest) string {
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
	old       map[string]bool // the retired keys' recipients
	gen       uint64          // when not 0: the generation an object must carry to count as sealed as the run would seal it

	prog     progressRecord
	lastSave time.Time

	checking    bool // the look before writing (Progress.Checking)
	sawProgress bool // the listing held an interrupted run's record
}

// reservedSkip reports the names a rekey never re-seals: the lock's own
// (the lock rewrites them, sealed by the run's store), the manifest and
// the progress record.
func reservedSkip(name string) bool {
	return lockadmin.Owns(name) || name == storemeta.ManifestName || name == ProgressName
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
	r.sawProgress = havePrev

	var rec lock.Record
	if l != nil {
		rec = l.Record()
	}
	r.prog = progressRecord{Version: progressVersion, Target: r.target, Total: res.Total, Resume: r.o.ResumeCommand,
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
	first := Progress{Total: res.Total, Checking: r.checking}
	if prev != nil {
		res.Resumed = true
		r.prog.StartedAt = prev.StartedAt
		first.Resumed = &Resumed{StartedAt: prev.StartedAt, InstanceID: prev.InstanceID, Done: prev.Done, Total: prev.Total}
	} else if l != nil {
		// The record from the start, before the first object: an
		// interruption at any point (SIGKILL included) leaves it, so that
		// readers can tell pending objects from failures (ReadProgress).
		if err := r.saveProgress(ctx); err != nil {
			return err
		}
	}
	r.report(first)

	for _, o := range objs {
		if done(o) {
			res.Skipped++
		} else {
			outcome, err := r.reseal(ctx, o.Name)
			if err != nil {
				if l != nil {
					// Keep what was done: the next run continues from here.
					if serr := r.saveProgress(context.WithoutCancel(ctx)); serr != nil {
						r.o.Logger.Warn("rekey: saving progress", "err", serr)
					}
				}
				return err
			}
			switch outcome {
			case resealed:
				res.Resealed++
			case current:
				res.UpToDate++
			}
		}
		res.Done++
		r.prog.After, r.prog.Done = o.Name, res.Done
		if l != nil && res.Resealed > 0 && (res.Resealed%r.o.CheckpointEvery == 0 || time.Since(r.lastSave) >= r.o.CheckpointInterval) {
			if err := r.saveProgress(ctx); err != nil {
				return err
			}
		}
		r.report(Progress{Checking: r.checking, Total: res.Total, Done: res.Done, Resealed: res.Resealed, Skipped: res.Skipped, UpToDate: res.UpToDate})
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

// outcome is what reseal did with one object.
type outcome int

const (
	gone     outcome = iota // removed since the listing, or a reserved one left as it is
	resealed                // re-sealed (or, in a dry run, would be)
	current                 // already sealed to the new set: left as it is
)

// reseal opens one object and writes it back sealed to the new set, only
// if it did not change meanwhile where the backend can tell, and only if
// it is not already sealed so (unless Options.Restart).
func (r *run) reseal(ctx context.Context, name string) (outcome, error) {
	obj, err := storeadmin.GetObject(ctx, r.st, name)
	if errors.Is(err, store.ErrNotFound) {
		return gone, nil // removed since the listing
	}
	if err != nil {
		if ctx.Err() != nil {
			return gone, err
		}
		if len(r.o.Recovery) > 0 && storeadmin.IsHistoryRecord(name) &&
			(errors.Is(err, envelope.ErrNoMatchingIdentity) || errors.Is(err, envelope.ErrUnauthenticated)) {
			// A tombstone only a retired key authenticated: never
			// laundered through the recovery key, and worth nothing
			// unauthenticated (it names a deletion); removed, so that the
			// kept versions stay readable.
			if r.o.DryRun {
				return gone, nil
			}
			if err := r.st.Delete(ctx, name, store.DeleteOptions{}); err != nil && !errors.Is(err, store.ErrNotFound) {
				return gone, fmt.Errorf("rekey: %w", err)
			}
			r.o.Logger.Warn("rekey: removed a history record that no identity authenticates (it only names a deletion)", "object", name)
			return gone, nil
		}
		if len(r.o.Recovery) > 0 && strings.HasPrefix(name, ".") &&
			(errors.Is(err, envelope.ErrNoMatchingIdentity) || errors.Is(err, envelope.ErrUnauthenticated)) {
			// Never through a recovery identity (issue #14): left as it is.
			r.res.ReservedLeft = append(r.res.ReservedLeft, name)
			r.o.Logger.Warn("rekey: left a reserved object that no identity authenticates; reserved objects never open through a recovery identity", "object", name)
			return gone, nil
		}
		return gone, fmt.Errorf("rekey: %w", err) // it names the object
	}
	if obj.Opened.Unauthenticated {
		r.res.Unauthenticated = append(r.res.Unauthenticated, name)
	} else if r.old[obj.Opened.AuthenticatedBy] {
		r.res.Reauthenticated = append(r.res.Reauthenticated, name)
	}
	if !r.o.Restart && sealedToTheSet(obj.Opened, r.gen) {
		return current, nil
	}
	if r.o.DryRun {
		return resealed, nil
	}
	// Re-sealed keeping its stamp (its version id): a kept version must
	// not become newer than its object, nor an object change its id.
	if _, err := storeadmin.Reseal(ctx, r.st, obj); err != nil {
		if errors.Is(err, store.ErrPreconditionFailed) {
			return gone, fmt.Errorf("rekey: %q changed while it was being re-sealed (is another writer ignoring the lock?); run rekey again: %w", name, err)
		}
		return gone, fmt.Errorf("rekey: %w", err)
	}
	return resealed, nil
}

// sealedToTheSet reports an object that a re-seal would write as it is:
// bound to the store, sealed to exactly the run's recipient set — under
// generation gen, when gen is not 0 (a run that raises the generation) —
// and authenticated by an identity (not opened through a recovery key).
func sealedToTheSet(o envelope.Opened, gen uint64) bool {
	return !o.StoreID.IsZero() && o.SameRecipients && !o.Unauthenticated && (gen == 0 || o.Stamp.Generation == gen)
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

// Interrupted is what the progress record of an interrupted (or failed)
// run says: [ReadProgress] returns it.
type Interrupted struct {
	// Readable reports that the record opened with the store's keys; the
	// fields below are zero otherwise (its presence alone is known).
	Readable bool
	// Done of Total objects had been gone through; After is the last one,
	// in lexical order.
	Done, Total int
	After       string
	// StartedAt and InstanceID say which run it was.
	StartedAt  time.Time
	InstanceID string
	// Resume is the command the run recorded to resume it
	// (Options.ResumeCommand); empty when it recorded none.
	Resume string
}

// Pending reports whether the object name may not be re-sealed yet: the
// run had not gone past it. With an unreadable record every object may be.
func (i *Interrupted) Pending(name string) bool { return !i.Readable || name > i.After }

// ReadProgress reads the progress record an interrupted rekey left in st
// (a connected store; the record is reserved, so it is read through
// st.Internal()). It returns nil when there is none — no rekey is
// unfinished — and an Interrupted with Readable false when the record is
// there but does not open with st's keys (none configured, or another
// set's). Errors are the storage's and ctx's.
func ReadProgress(ctx context.Context, st *store.Store) (*Interrupted, error) {
	in := storeadmin.Internal(st)
	if _, err := in.Stat(ctx, ProgressName); errors.Is(err, store.ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("rekey: reading the progress record: %w", err)
	}
	data, _, err := in.Get(ctx, ProgressName)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil // finished meanwhile
	case errors.Is(err, store.ErrUnreadable):
		return &Interrupted{}, nil
	case err != nil:
		return nil, fmt.Errorf("rekey: reading the progress record: %w", err)
	}
	var p progressRecord
	if err := json.Unmarshal(data, &p); err != nil || p.Version != progressVersion {
		return &Interrupted{}, nil
	}
	return &Interrupted{Readable: true, Done: p.Done, Total: p.Total, After: p.After,
		StartedAt: p.StartedAt, InstanceID: p.InstanceID, Resume: p.Resume}, nil
}
