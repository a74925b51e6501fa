package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"filippo.io/age"

	"github.com/cairnhq/state/envelope"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// progressName is the reserved state name of rekey's progress record. The
// record is sealed like all state.
const progressName = ".rekey"

// progressVersion is the version of the progress record's JSON.
const progressVersion = 1

// progressEvery bounds how much work an interruption can cost: the progress
// record is saved after this many objects or this much time, whichever
// comes first. Re-sealing an object twice is harmless, so the record only
// saves work; correctness never depends on it being current.
const (
	progressEvery    = 64
	progressInterval = 2 * time.Second
)

// rekeyPause is called after each object rekey re-seals, with the count so
// far and a function that saves the progress record. Only the test build
// (go build -tags cairntest, see testhooks_cairntest.go) has one, to stop
// at a known point; the shipped binary has none (testhooks.go).
type rekeyPause func(ctx context.Context, resealed int, save func(context.Context) error) error

// rekeyProgress is the progress record: every object whose name is ≤ After
// (in lexical order) and that was not written after the record was saved
// has been re-sealed to the recipient set whose fingerprint is Target.
type rekeyProgress struct {
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

type rekeyDoc struct {
	Total      int     `json:"total"`
	Resealed   int     `json:"resealed"`
	Skipped    int     `json:"skipped"` // already re-sealed by an interrupted run
	Resumed    bool    `json:"resumed"`
	Recipients int     `json:"recipients"`
	Seconds    float64 `json:"seconds"`
	Lock       lockDoc `json:"lock"`
}

// splitSealer opens with one envelope and seals with another: rekey reads
// with the current and old identities, and seals to the current recipients
// only.
type splitSealer struct {
	open, seal store.Sealer
}

func (s splitSealer) Seal(name string, p []byte) ([]byte, error) { return s.seal.Seal(name, p) }
func (s splitSealer) Open(name string, c []byte) ([]byte, error) { return s.open.Open(name, c) }

// runRekey re-seals every object, the reserved ones except the lock and
// its saved epoch included, to the current recipient set: the recipients
// of --identity plus --recipient (the saved epoch is rewritten to them by
// the release of the run's own lock). Objects are opened with --identity
// and --old-identity, so a rotation reads with the old key and seals
// without it. With --allow-unauthenticated it also reads objects no
// configured identity authenticates: the recovery path when only a
// recovery key (a recipient that never wrote) survives. It holds the lock
// throughout and is resumable: an interrupted run (even SIGKILL) leaves a
// progress record that the next run with the same recipient set continues
// from; with another recipient set it starts over.
func runRekey(ctx context.Context, a *app, args []string) error {
	fs := a.flags("rekey")
	var old listFlag
	fs.Var(&old, "old-identity", "an identity `FILE` to open objects with but not seal to (the key being retired); repeatable")
	restart := fs.Bool("restart", false, "ignore the progress of an interrupted run and re-seal everything")
	fs.BoolVar(&a.allowUnauth, "allow-unauthenticated", false, "emergency recovery: also read objects no configured identity authenticates (with a recovery key that never wrote), and re-seal them authenticated")
	a.waitFlag(fs)
	if _, err := a.parse(fs, args, 0, 0); err != nil {
		return err
	}
	k, err := a.loadKeys(true)
	if err != nil {
		return err
	}
	var oldIDs []age.Identity
	for _, path := range old {
		if err := checkIdentityArg("--old-identity", path); err != nil {
			return err
		}
		ids, err := loadIdentityFile(path) // its errors name the path
		if err != nil {
			return fmt.Errorf("--old-identity: %w", err)
		}
		oldIDs = append(oldIDs, ids...)
	}
	sealEnv, err := envelope.New(k.identities, k.recipients, &envelope.Options{Logger: a.logger})
	if err != nil {
		return err
	}
	openEnv, err := a.newEnvelope(append(slices.Clone(k.identities), oldIDs...), nil)
	if err != nil {
		return err
	}
	target, nrcpt := fingerprint(k)
	st, err := a.openStoreWith(ctx, splitSealer{open: openEnv, seal: sealEnv})
	if err != nil {
		return err
	}
	pause, err := testRekeyPause(a)
	if err != nil {
		return err
	}
	// The lock about to be replaced: if it is the interrupted run's own,
	// nobody held the lock since that run last saved its progress.
	var replacing string
	if before, err := lock.Inspect(ctx, st, &lock.InspectOptions{StaleAfter: a.staleAfter}); err == nil && before.Readable {
		replacing = before.Record.AcquisitionID
	}
	signalled := ctx
	return a.withLock(ctx, st, "rekey", func(ctx context.Context, fenced *store.Store, l *lock.Lock) error {
		r := rekeyer{a: a, st: fenced.Internal(), l: l, target: target, pause: pause, replacing: replacing}
		doc, err := r.run(ctx, *restart)
		if err != nil && signalled.Err() != nil && l.Err() == nil {
			// SIGINT or SIGTERM, not a lost lock: say how far it got.
			// The progress record is saved (run saves it on any error).
			return r.interrupted(doc, err)
		}
		if err != nil {
			return err
		}
		doc.Recipients = nrcpt
		doc.Lock = lockOf(l)
		if a.json {
			a.emit(doc)
			return nil
		}
		how := ""
		if doc.Resumed {
			how = fmt.Sprintf(" (resumed: %d already done by the interrupted run)", doc.Skipped)
		}
		a.printf("rekey: re-sealed %d of %d objects to %s in %s%s\n",
			doc.Resealed, doc.Total, plural(doc.Recipients, "recipient"), time.Duration(doc.Seconds*float64(time.Second)).Round(time.Millisecond), how)
		return nil
	})
}

// rekeyer is one rekey run, holding the lock.
type rekeyer struct {
	a         *app
	st        *store.Store // internal view, fenced by the lock
	l         *lock.Lock
	target    string
	pause     rekeyPause // nil but in the test build
	replacing string     // acquisition id of the lock record found before acquiring

	prog     rekeyProgress
	lastSave time.Time
	listed   bool // the listing is complete and prog.Total counts the objects
}

// interrupted is the error of a run stopped by a signal: how far it got,
// and that the same command resumes. It unwraps to the cause.
func (r *rekeyer) interrupted(doc rekeyDoc, err error) error {
	msg := "rekey: interrupted before it listed the objects; nothing was re-sealed. Run the same command again"
	if r.listed {
		msg = fmt.Sprintf("rekey: interrupted after re-sealing %d of %d objects; run the same command again to resume where it stopped", r.prog.Done, doc.Total)
	}
	return &wordedError{msg: msg, err: err}
}

func (r *rekeyer) run(ctx context.Context, restart bool) (rekeyDoc, error) {
	start := time.Now()
	var doc rekeyDoc
	var objs []store.Info
	var progInfo store.Info
	havePrev := false
	err := r.st.List(ctx, "", func(i store.Info) error {
		switch {
		case lock.Owns(i.Name):
			// The lock record is ours now, written by the new sealer; the
			// saved epoch is rewritten, sealed by the new sealer too, when
			// this run releases its lock (lock.Release saves the epoch of
			// the lock it removes). Re-sealing it here would only race that
			// write.
		case i.Name == progressName:
			progInfo, havePrev = i, true
		default:
			objs = append(objs, i)
		}
		return nil
	})
	if err != nil {
		return doc, fmt.Errorf("rekey: %w", err)
	}
	r.listed = true
	slices.SortFunc(objs, func(x, y store.Info) int { return strings.Compare(x.Name, y.Name) })
	doc.Total = len(objs)

	rec := r.l.Record()
	r.prog = rekeyProgress{Version: progressVersion, Target: r.target, Total: doc.Total,
		StartedAt: time.Now().UTC(), InstanceID: rec.InstanceID, Epoch: rec.Epoch, AcquisitionID: rec.AcquisitionID}
	var prev *rekeyProgress
	if havePrev && !restart && r.target != "" {
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
	if prev != nil {
		doc.Resumed = true
		r.prog.StartedAt = prev.StartedAt
	}

	bar := newProgressBar(r.a, "rekey", doc.Total)
	defer bar.done()
	for _, o := range objs {
		if done(o) {
			doc.Skipped++
		} else {
			if err := r.reseal(ctx, o.Name); err != nil {
				// Keep what was done: the next run continues from here.
				if serr := r.saveProgress(context.WithoutCancel(ctx)); serr != nil {
					r.a.logger.Warn("rekey: saving progress", "err", serr)
				}
				return doc, err
			}
			doc.Resealed++
		}
		r.prog.After, r.prog.Done = o.Name, r.prog.Done+1
		bar.set(r.prog.Done)
		if doc.Resealed > 0 && (doc.Resealed%progressEvery == 0 || time.Since(r.lastSave) >= progressInterval) {
			if err := r.saveProgress(ctx); err != nil {
				return doc, err
			}
		}
		if r.pause != nil {
			if err := r.pause(ctx, doc.Resealed, r.saveProgress); err != nil {
				return doc, err
			}
		}
	}
	if havePrev || !r.lastSave.IsZero() {
		if err := r.st.Delete(ctx, progressName, store.DeleteOptions{}); err != nil && !errors.Is(err, store.ErrNotFound) {
			return doc, fmt.Errorf("rekey: removing the progress record: %w", err)
		}
	}
	doc.Seconds = time.Since(start).Seconds()
	return doc, nil
}

// reseal opens one object and writes it back sealed to the new recipients,
// only if it did not change meanwhile where the backend can tell.
func (r *rekeyer) reseal(ctx context.Context, name string) error {
	data, info, err := r.st.Get(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil // removed since the listing
	}
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		hint := ""
		switch reason(err) {
		case reasonWrongKey:
			hint = "; pass the key it is sealed to with --old-identity FILE"
		case reasonUnauthenticated:
			hint = "; if you are recovering with a recovery key that never wrote, and trust the storage, add --allow-unauthenticated"
		}
		// err names the object.
		return fmt.Errorf("rekey: %w (%s)%s", err, reason(err), hint)
	}
	var opts store.PutOptions
	if r.st.ConditionalWrites() {
		opts.IfVersion = info.Version
	}
	if _, err := r.st.Put(ctx, name, data, opts); err != nil {
		if errors.Is(err, store.ErrPreconditionFailed) {
			return fmt.Errorf("rekey: %q changed while it was being re-sealed (is another writer ignoring the lock?); run rekey again: %w", name, err)
		}
		return fmt.Errorf("rekey: %w", err)
	}
	return nil
}

// loadProgress returns the previous run's record if it is for the same
// recipient set, and nil otherwise.
func (r *rekeyer) loadProgress(ctx context.Context) *rekeyProgress {
	data, _, err := r.st.Get(ctx, progressName)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		fmt.Fprintf(r.a.err, "rekey: the interrupted run's progress record does not open (%s); starting over\n", reason(err))
		return nil
	}
	var p rekeyProgress
	if err := json.Unmarshal(data, &p); err != nil || p.Version != progressVersion {
		fmt.Fprintf(r.a.err, "rekey: the interrupted run's progress record is not understood; starting over\n")
		return nil
	}
	if p.Target != r.target {
		fmt.Fprintf(r.a.err, "rekey: an interrupted rekey to another recipient set was found; starting over\n")
		return nil
	}
	fmt.Fprintf(r.a.err, "rekey: resuming the run started %s by %s (%d of %d objects done)\n",
		timestamp(p.StartedAt), p.InstanceID, p.Done, p.Total)
	return &p
}

func (r *rekeyer) saveProgress(ctx context.Context) error {
	data, err := json.Marshal(r.prog)
	if err != nil {
		return err
	}
	if _, err := r.st.Put(ctx, progressName, data, store.PutOptions{}); err != nil {
		return fmt.Errorf("rekey: saving progress: %w", err)
	}
	r.lastSave = time.Now()
	return nil
}

// fingerprint identifies the recipient set objects are sealed to: a hash of
// the sorted recipient strings of the identities and extra recipients, or ""
// when some recipient has no text form. It also returns how many recipients
// there are.
func fingerprint(k keys) (string, int) {
	var all []string
	text := true
	add := func(r age.Recipient) {
		if st, ok := r.(fmt.Stringer); ok {
			all = append(all, st.String())
		} else {
			text = false
			all = append(all, fmt.Sprintf("%T", r))
		}
	}
	for _, id := range k.identities {
		if r, err := envelope.RecipientOf(id); err == nil {
			add(r)
		} else {
			text = false
		}
	}
	for _, r := range k.recipients {
		add(r)
	}
	slices.Sort(all)
	all = slices.Compact(all)
	if !text {
		// A recipient without a text form (scrypt) cannot be told apart
		// from another: never resume, always start over.
		return "", len(all)
	}
	h := sha256.Sum256([]byte(strings.Join(all, "\n")))
	return hex.EncodeToString(h[:]), len(all)
}
