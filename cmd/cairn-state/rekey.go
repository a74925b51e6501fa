package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"filippo.io/age"

	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/rekey"
	"github.com/cairnhq/state/store"
)

// progressName is the reserved state name of rekey's progress record.
const progressName = rekey.ProgressName

type rekeyDoc struct {
	Total      int      `json:"total"`
	Resealed   int      `json:"resealed"`
	Skipped    int      `json:"skipped"` // already re-sealed by an interrupted run
	Resumed    bool     `json:"resumed"`
	Recipients int      `json:"recipients"`
	Seconds    float64  `json:"seconds"`
	Lock       lockDoc  `json:"lock"`
	Store      storeDoc `json:"store"`
	// Unauthenticated names the objects re-sealed after opening through a
	// recovery identity (--allow-unauthenticated).
	Unauthenticated []string `json:"unauthenticated,omitempty"`
	// ReservedLeft names the reserved objects no identity authenticates:
	// never opened through a recovery identity, so left as they are.
	ReservedLeft []string `json:"reserved_left,omitempty"`
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
	Format     int       `json:"format"`
	Generation uint64    `json:"generation"`
	Recipients []string  `json:"recipients"`
	Created    time.Time `json:"created"`
}

func storeOf(m store.Manifest) storeDoc {
	return storeDoc{ID: m.ID.String(), Format: m.Format, Generation: m.Generation, Recipients: m.Recipients, Created: m.Created}
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
	restart := fs.Bool("restart", false, "ignore the progress of an interrupted run and re-seal everything")
	a.recoveryFlags(fs, true)
	yes := fs.Bool("yes", false, "with --allow-unauthenticated: re-seal what it lists (without --yes it only lists the objects it would re-seal as authentic)")
	a.waitFlag(fs)
	if _, err := a.parse(fs, args, 0, 0); err != nil {
		return err
	}
	if err := a.checkRecoveryFlags("rekey"); err != nil {
		return err
	}
	a.write, a.quietDiff = true, true // the command's own recipients are the new set
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
	opts := &rekey.Options{
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
	pause, checkpointEvery, err := testRekeyPause(a)
	if err != nil {
		return err
	}
	opts.CheckpointEvery = checkpointEvery
	opts.Progress = func(p rekey.Progress) {
		if p.Resumed != nil {
			fmt.Fprintf(a.err, "rekey: resuming the run started %s by %s (%d of %d objects done)\n",
				timestamp(p.Resumed.StartedAt), p.Resumed.InstanceID, p.Resumed.Done, p.Resumed.Total)
		}
		if bar == nil {
			bar = newProgressBar(a, "rekey", p.Total)
		}
		bar.set(p.Done)
		if pause != nil {
			pause(ctx, p.Resealed)
		}
	}
	res, err := rekey.Run(ctx, b, opts)
	if bar != nil {
		bar.done()
	}
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, lock.ErrLost) {
			// SIGINT or SIGTERM, not a lost lock: say how far it got. The
			// progress record is saved.
			msg := "rekey: interrupted before it listed the objects; nothing was re-sealed. Run the same command again"
			if res.Listed {
				msg = fmt.Sprintf("rekey: interrupted after re-sealing %d of %d objects; run the same command again to resume where it stopped", res.Done, res.Total)
			}
			return &wordedError{msg: msg, err: err}
		}
		return rekeyErr(err)
	}
	doc := rekeyDoc{Total: res.Total, Resealed: res.Resealed, Skipped: res.Skipped, Resumed: res.Resumed,
		Recipients: len(res.Manifest.Recipients), Seconds: res.Elapsed.Seconds(),
		Lock:  lockDoc{InstanceID: res.Lock.InstanceID, Epoch: res.Lock.Epoch, Mode: string(res.Lock.Mode)},
		Store: storeOf(res.Manifest), Unauthenticated: res.Unauthenticated, ReservedLeft: res.ReservedLeft}
	for _, name := range res.ReservedLeft {
		fmt.Fprintf(a.err, "rekey: left %s as it was: no identity authenticates it, and reserved objects never open through a recovery identity; restore it from a backup, or remove it from the bucket (the migration log: migrations then run again)\n", name)
	}
	if a.json {
		a.emit(doc)
		return nil
	}
	how := ""
	if doc.Resumed {
		how = fmt.Sprintf(" (resumed: %d already done by the interrupted run)", doc.Skipped)
	}
	gen := ""
	if res.PreviousGeneration != 0 && res.PreviousGeneration != res.Manifest.Generation {
		gen = fmt.Sprintf("; key generation %d → %d", res.PreviousGeneration, res.Manifest.Generation)
	}
	a.printf("rekey: re-sealed %d of %d objects to %s in %s%s (store %s%s)\n",
		doc.Resealed, doc.Total, plural(doc.Recipients, "recipient"), res.Elapsed.Round(time.Millisecond), how, res.Manifest.ID, gen)
	if len(res.Unauthenticated) > 0 {
		a.printf("rekey: %s opened only through the recovery identity and are authenticated from now on: %s\n",
			plural(len(res.Unauthenticated), "object"), strings.Join(res.Unauthenticated, ", "))
	}
	return nil
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
