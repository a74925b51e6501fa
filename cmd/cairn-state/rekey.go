package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"filippo.io/age"

	"github.com/cairnhq/state/internal/rekey"
	"github.com/cairnhq/state/internal/storemeta"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// progressName is the reserved state name of rekey's progress record.
const progressName = rekey.ProgressName

type rekeyDoc struct {
	// NothingToChange: the store and every object were already sealed to
	// the set; nothing was written (Resealed 0).
	NothingToChange bool     `json:"nothing_to_change"`
	Total           int      `json:"total"`
	Resealed        int      `json:"resealed"`
	Skipped         int      `json:"skipped"`    // already re-sealed by an interrupted run
	UpToDate        int      `json:"up_to_date"` // found sealed to the set already, left as they were
	Resumed         bool     `json:"resumed"`
	Recipients      int      `json:"recipients"`
	Seconds         float64  `json:"seconds"`
	Lock            *lockDoc `json:"lock,omitempty"` // none when nothing was changed
	Store           storeDoc `json:"store"`
	// Unauthenticated names the objects re-sealed after opening through a
	// recovery identity (--allow-unauthenticated).
	Unauthenticated []string `json:"unauthenticated,omitempty"`
	// ReservedLeft names the reserved objects no identity authenticates:
	// never opened through a recovery identity, so left as they are.
	ReservedLeft []string `json:"reserved_left,omitempty"`
	// Reauthenticated names the objects only a retired key (--old-identity)
	// authenticated, now authenticated under the new set.
	Reauthenticated []string `json:"reauthenticated,omitempty"`
}

// rekeyPlanDoc is what `rekey --allow-unauthenticated` without --yes
// would do.
type rekeyPlanDoc struct {
	Total           int      `json:"total"`
	Unauthenticated []string `json:"unauthenticated"`
	ReservedLeft    []string `json:"reserved_left"`
	Confirmed       bool     `json:"confirmed"`
}

// storeDoc describes a store's manifest in JSON output.
type storeDoc struct {
	ID         string    `json:"id"`
	Generation uint64    `json:"generation"`
	LockMode   string    `json:"lock_mode"`
	Recipients []string  `json:"recipients"`
	Created    time.Time `json:"created"`
}

func storeOf(m storemeta.Manifest) storeDoc {
	return storeDoc{ID: m.ID.String(), Generation: m.Generation, LockMode: m.LockMode, Recipients: m.Recipients, Created: m.Created}
}

// runRekey moves the store to the current recipient set — the recipients
// of --identity plus --recipient — with the rekey package: the store's
// manifest first, then every object (the reserved ones but the lock's), so
// that afterwards the old keys are refused as foreign. Objects are opened
// with --identity and --old-identity, so a rotation reads with the old key
// and seals without it. With --allow-unauthenticated it also reads the
// application's objects that no identity authenticates, through the
// --recovery-identity keys, after listing them and only with --yes. It
// holds the lock throughout and is resumable: an interrupted run (even
// SIGKILL) leaves a progress record that the same command continues from.
func runRekey(ctx context.Context, a *app, args []string) error {
	fs := a.flags("rekey")
	var old listFlag
	fs.Var(&old, "old-identity", "an identity `FILE` to open objects with but not seal to (the key being retired); repeatable")
	restart := fs.Bool("restart", false, "ignore the progress of an interrupted run and re-seal every object, also those already sealed to the new set")
	a.recoveryFlags(fs, true)
	yes := fs.Bool("yes", false, "with --allow-unauthenticated: re-seal what it lists (without --yes it only lists the objects it would re-seal as authentic)")
	a.waitFlag(fs)
	if _, err := a.parse(fs, args, 0, 0); err != nil {
		return err
	}
	if err := a.checkRecoveryFlags("rekey"); err != nil {
		return err
	}
	a.quietDiff = true // the command's own recipients are the new set
	k, err := a.loadKeys(true)
	if err != nil {
		return err
	}
	if len(k.identities) == 0 {
		return usagef("rekey: the new set needs an --identity FILE (the key that will write)")
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
	b, root, err := a.openBackend(ctx)
	if err != nil {
		return err
	}
	if a.boot, err = a.bootOptions(root); err != nil {
		return err
	}
	opts := rekey.Options{
		StoreID:       a.boot.StoreID,
		Location:      a.boot.Location,
		Identities:    k.identities,
		Recipients:    k.recipients,
		OldIdentities: oldIDs,
		Restart:       *restart,
		Root:          root,
		StaleAfter:    a.staleAfter,
		Acquire:       a.acquire,
		Logger:        a.logger,
	}
	if a.allowUnauth {
		opts.Recovery = k.recovery
		if !*yes {
			opts.DryRun = true
			res, err := rekey.Run(ctx, b, opts)
			if err != nil {
				return rekeyErr(err)
			}
			return a.rekeyPlan(res)
		}
	}

	var bar *progressBar
	checking := false
	pause, checkpointEvery, err := testRekeyPause(a)
	if err != nil {
		return err
	}
	opts.CheckpointEvery = checkpointEvery
	opts.ResumeCommand = resumeCommand(a, old)
	opts.Progress = func(p rekey.Progress) {
		if p.Resumed != nil {
			a.say("note", fmt.Sprintf("rekey: resuming the run started %s by %s (%d of %d objects done)",
				timestamp(p.Resumed.StartedAt), shown(p.Resumed.InstanceID), p.Resumed.Done, p.Resumed.Total),
				"resumed_done", p.Resumed.Done, "resumed_total", p.Resumed.Total)
		}
		if bar != nil && checking != p.Checking {
			bar.done() // the look is over: the re-sealing pass starts
			bar = nil
		}
		if bar == nil {
			step := "" // re-sealing
			if p.Checking {
				step = "checking"
			}
			bar, checking = newProgressBar(a, "rekey", step, p.Total), p.Checking
		}
		bar.set(p.Done)
		if pause != nil && !p.Checking {
			pause(ctx, p.Resealed)
		}
	}
	// Taking and holding the lock: a signal waits for its release.
	busy.Add(1)
	res, err := rekey.Run(ctx, b, opts)
	busy.Add(-1)
	if bar != nil {
		bar.done()
	}
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, lock.ErrLost) {
			// SIGINT or SIGTERM, not a lost lock: say how far it got. The
			// progress record is saved.
			msg := "rekey: interrupted before it listed the objects; nothing was re-sealed. Run the same command again"
			if res.Listed {
				msg = fmt.Sprintf("rekey interrupted at %d of %d: resume with `%s`", res.Done, res.Total, opts.ResumeCommand)
			}
			return &wordedError{msg: msg, err: err}
		}
		return rekeyErr(err)
	}
	if res.NothingToChange {
		return a.rekeyNothingToChange(res)
	}
	doc := rekeyDoc{Total: res.Total, Resealed: res.Resealed, Skipped: res.Skipped, UpToDate: res.UpToDate, Resumed: res.Resumed,
		Recipients: len(res.Manifest.Recipients), Seconds: res.Elapsed.Seconds(),
		Lock:  &lockDoc{InstanceID: res.Lock.InstanceID, Epoch: res.Lock.Epoch, Mode: string(res.Lock.Mode)},
		Store: storeOf(res.Manifest), Unauthenticated: res.Unauthenticated, ReservedLeft: res.ReservedLeft,
		Reauthenticated: res.Reauthenticated}
	if len(res.Reauthenticated) > 0 {
		a.say("note", fmt.Sprintf("rekey: note: %s were authenticated only by a retired key and are authenticated by the new set from now on: a rotation does not undo a forgery made with a leaked key; if that key leaked, compare them with a recovery export from before the leak and restore what differs (docs/security.md)",
			plural(len(res.Reauthenticated), "object")))
	}
	for _, name := range res.ReservedLeft {
		a.say("note", fmt.Sprintf("rekey: left %s as it was: no identity authenticates it, and reserved objects never open through a recovery identity; restore it from a backup, or remove it from the bucket (the migration log: migrations then run again)", shown(name)))
	}
	if a.json {
		a.emit(doc)
		return nil
	}
	how := ""
	if doc.Resumed {
		how = fmt.Sprintf(" (resumed: %d already done by the interrupted run)", doc.Skipped)
	}
	if doc.UpToDate > 0 {
		how += fmt.Sprintf(" (%d already sealed to them)", doc.UpToDate)
	}
	gen := ""
	if res.PreviousGeneration != 0 && res.PreviousGeneration != res.Manifest.Generation {
		gen = fmt.Sprintf("; manifest generation %d → %d", res.PreviousGeneration, res.Manifest.Generation)
	}
	a.printf("rekey: re-sealed %d of %d objects to %s in %s%s (store %s%s)\n",
		doc.Resealed, doc.Total, plural(doc.Recipients, "recipient"), res.Elapsed.Round(time.Millisecond), how, res.Manifest.ID, gen)
	if len(res.Unauthenticated) > 0 {
		a.printf("rekey: %s opened only through the recovery identity and are authenticated from now on: %s\n",
			plural(len(res.Unauthenticated), "object"), strings.Join(res.Unauthenticated, ", "))
	}
	return nil
}

// rekeyNothingToChange reports a rekey that found nothing to re-seal.
func (a *app) rekeyNothingToChange(res rekey.Result) error {
	if a.json {
		a.emit(rekeyDoc{NothingToChange: true, Total: res.Total, UpToDate: res.UpToDate,
			Recipients: len(res.Manifest.Recipients), Seconds: res.Elapsed.Seconds(), Store: storeOf(res.Manifest)})
		return nil
	}
	a.printf("rekey: nothing to change: the store (%s) and its %s are already sealed to its %s; nothing was re-sealed (checked in %s; --restart re-seals every object anyway)\n",
		res.Manifest.ID, plural(res.Total, "object"), plural(len(res.Manifest.Recipients), "recipient"), res.Elapsed.Round(time.Millisecond))
	return nil
}

// resumeCommand is the command line that resumes this rekey if it is
// interrupted, recorded in its progress record for verify, get, doctor
// and lock status to show: the key files (absolute: it may be run from
// elsewhere) and the public recipients. Never a secret, nor the URL (its
// credentials): it runs against the same store.
func resumeCommand(a *app, old []string) string {
	words := []string{"cairn-state", "rekey"}
	file := func(flag, path string) {
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
		words = append(words, flag, shellQuote(path))
	}
	for _, p := range a.identities {
		file("--identity", p)
	}
	for _, p := range old {
		file("--old-identity", p)
	}
	for _, r := range a.recipients {
		words = append(words, "--recipient", shellQuote(r))
	}
	for _, p := range a.recoveryFiles {
		file("--recovery-identity", p)
	}
	if a.allowUnauth {
		words = append(words, "--allow-unauthenticated", "--yes")
	}
	return strings.Join(words, " ")
}

// rekeyPlan reports what `rekey --allow-unauthenticated` would re-seal,
// and fails: nothing is written without --yes.
func (a *app) rekeyPlan(res rekey.Result) error {
	doc := rekeyPlanDoc{Total: res.Total, Unauthenticated: res.Unauthenticated, ReservedLeft: res.ReservedLeft}
	if doc.Unauthenticated == nil {
		doc.Unauthenticated = []string{}
	}
	if doc.ReservedLeft == nil {
		doc.ReservedLeft = []string{}
	}
	if a.json {
		a.emit(doc)
	} else {
		a.printf("rekey --allow-unauthenticated would re-seal %s to the new recipients.\n", plural(res.Total-len(res.ReservedLeft), "object"))
		if len(res.Unauthenticated) > 0 {
			a.printf("These open only through the recovery identity, so they cannot be authenticated and may be forged; they would be re-sealed as authentic:\n")
			for _, n := range res.Unauthenticated {
				a.printf("  %s\n", n)
			}
		}
		for _, n := range res.ReservedLeft {
			a.printf("left as it is (reserved objects never open through a recovery identity): %s\n", n)
		}
		a.printf("Nothing was written. Check the list, then run the same command with --yes.\n")
	}
	return &reportedError{msg: fmt.Sprintf("rekey: nothing re-sealed; %s would be re-sealed unauthenticated: confirm with --yes", plural(len(res.Unauthenticated), "object"))}
}

// rekeyErr adds a hint to an object that did not open.
func rekeyErr(err error) error {
	hint := ""
	switch reason(err) {
	case reasonWrongKey:
		hint = "; pass the key it is sealed to with --old-identity FILE"
	case reasonUnauthenticated:
		hint = "; if you are recovering with a recovery key that never wrote, and trust the storage: --recovery-identity FILE --allow-unauthenticated (it lists what it would re-seal first)"
	}
	if hint == "" || !errors.Is(err, store.ErrUnreadable) {
		return err
	}
	return fmt.Errorf("%w (%s)%s", err, reason(err), hint)
}
