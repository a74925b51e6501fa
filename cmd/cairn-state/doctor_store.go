package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"filippo.io/age"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/boot"
	"github.com/cairnhq/state/internal/rekey"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/storemeta"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// manifestFacts are the membership line's: the manifest read.
type manifestFacts struct {
	Error    string `json:"error,omitempty"`
	LockMode string `json:"lock_mode,omitempty"`
	Object   string `json:"object,omitempty"`
	StoreID  string `json:"store_id,omitempty"`
}

// objectFacts name the object a check read.
type objectFacts struct {
	Object string `json:"object,omitempty"`
}

// errorFacts are a storage error's.
type errorFacts struct {
	Error string `json:"error,omitempty"`
}

// checkMembership tells whether the configured identities open the store:
// its manifest (.cairn-state/.store), read as every other command reads it
// (the first-open protocol's Connect, --store-id included). It names the
// store's id.
func (d *doctor) checkMembership(ctx context.Context) {
	switch {
	case !d.storage:
		d.skip(checkMembership, d.why)
		return
	case len(d.a.identities) == 0:
		why := "no identity configured"
		if st, err := d.connect(ctx, nil); err == nil && st.StoreID() != "" {
			why += "; the manifest's header names store " + st.StoreID() + " (not authenticated without a key)"
		}
		d.skip(checkMembership, why)
		return
	case !d.keysOK:
		d.skip(checkMembership, "an identity file did not load")
		return
	}
	st, err := d.connect(ctx, d.keys)
	mf := &manifestFacts{Object: store.Prefix + storemeta.ManifestName}
	var (
		notMember *storemeta.NotMemberError
		wrong     *storemeta.WrongStoreError
	)
	switch {
	case errors.As(err, &notMember):
		mf.StoreID, mf.Error = notMember.StoreID.String(), notMember.Err.Error()
		d.add(checkMembership, statusFail, err.Error(),
			"pass the right one with --identity FILE (or CAIRN_STATE_IDENTITY); the other commands refuse this one with exit 5; a new store needs a URL of its own", mf)
		return
	case errors.As(err, &wrong):
		mf.StoreID, mf.Error = wrong.Found.String(), err.Error()
		d.add(checkMembership, statusFail, err.Error(),
			"the other commands refuse it with exit 5: fix --url, or --store-id (CAIRN_STATE_STORE_ID) if the store was replaced on purpose", mf)
		return
	case errors.Is(err, store.ErrNoStore):
		d.noStore = true
		d.add(checkMembership, statusWarn, "no store at this location yet: nothing is under "+reservedPrefix(d.root),
			"cairn-state init creates one (until then the other commands exit 6); if the store should be here, check --url", nil)
		return
	case errors.Is(err, store.ErrManifestMissing), errors.Is(err, store.ErrBadManifest):
		mf.Error = err.Error()
		d.add(checkMembership, statusFail, err.Error(), "restore "+store.Prefix+storemeta.ManifestName+" from a backup; nothing creates a store where objects are", mf)
		return
	case errors.Is(err, backend.ErrCapabilityMismatch):
		mf.Error = err.Error()
		d.add(checkMembership, statusFail, err.Error(), "every instance of a store must take its lock the same way: drop conditional= from the URL", mf)
		return
	case err != nil:
		d.storageError(checkMembership, "reading the store's manifest", err)
		return
	}
	m, _ := storeadmin.Manifest(st)
	d.store = st
	mf.StoreID, mf.LockMode = m.ID.String(), m.LockMode
	finding := fmt.Sprintf("the identity opens the store: store id %s (created %s, %s, manifest generation %d, lock mode %s): read %s%s",
		m.ID, m.Created.UTC().Format(time.RFC3339), plural(len(m.Recipients), "recipient"), m.Generation, m.LockMode, store.Prefix, storemeta.ManifestName)
	pin := ""
	if d.a.storeID == "" {
		pin = fmt.Sprintf("pin it where the store is used: --store-id %s, CAIRN_STATE_STORE_ID or state.Config.StoreID", m.ID)
	}
	if diff := storeadmin.RecipientDiff(st); len(diff.NotSealedTo) > 0 { // a subset (a recovery key not carried here) is no difference
		d.add(checkMembership, statusWarn, finding+"; the configured recipients differ from the store's: "+diff.String(),
			"objects are sealed to the store's recipients; to change the store's set, run cairn-state rekey with the identities and recipients it should have", mf)
	} else {
		d.add(checkMembership, statusOK, finding, pin, mf)
	}
	d.checkRecordedMode(m)
}

// connect connects to the store as the other commands do, without
// creating one.
func (d *doctor) connect(ctx context.Context, ids []age.Identity) (*store.Store, error) {
	o, err := d.a.bootOptions(d.root)
	if err != nil {
		return nil, err
	}
	o.Create = false
	return boot.Connect(ctx, d.b, store.Keys{Identities: ids}, o)
}

// storeFor is the store the check called name reads: the one the
// membership check connected through its manifest, else a keyless
// connection (objects seen, not opened). With no storage, no store yet,
// or no connection, it skips the check, saying why, and returns nil.
func (d *doctor) storeFor(ctx context.Context, name string) *store.Store {
	switch {
	case !d.storage:
		d.skip(name, d.why)
	case d.noStore:
		d.skip(name, "there is no store yet")
	case d.store != nil:
		return d.store
	default:
		st, err := d.connect(ctx, nil)
		if err == nil {
			return st
		}
		d.skip(name, "the store could not be connected to: "+cause(err))
	}
	return nil
}

// checkRecordedMode compares the lock mode the store recorded at its
// creation, which every instance uses without probing, with what the
// storage does now (the probe's finding, or the URL's forced mode).
func (d *doctor) checkRecordedMode(m storemeta.Manifest) {
	recorded := lock.Mode(m.LockMode)
	f := &lockModeFacts{LockMode: m.LockMode, Evidence: m.Storage}
	switch {
	case d.lockMode == "":
		d.add(checkStoreMode, statusOK, fmt.Sprintf("the store's lock mode is %s (decided at its creation from: %s); the storage was not probed now", recorded, m.Storage), "", f)
	case d.lockMode == recorded:
		d.add(checkStoreMode, statusOK, fmt.Sprintf("the store's lock mode is %s (decided at its creation from: %s); the storage still behaves so", recorded, m.Storage), "", f)
	case recorded == lock.ModeCAS:
		d.add(checkStoreMode, statusWarn, fmt.Sprintf("the store's lock mode is compare-and-swap (decided at its creation from: %s), but the storage now implies %s", m.Storage, d.lockMode),
			"the compare-and-swap lock relies on conditional writes the storage no longer enforces, so it cannot keep a second instance out: stop all but one instance, and move the store to storage that enforces them (or recreate it with cairn-state init on a fresh location and copy the values)", f)
	default:
		d.add(checkStoreMode, statusWarn, fmt.Sprintf("the store's lock mode is claims (decided at its creation from: %s), but the storage now implies %s", m.Storage, d.lockMode),
			"harmless: the claims lock works on any storage; the store keeps it", f)
	}
	d.lockMode = recorded
}

// storageError reports a storage request that failed in a later check;
// one that got no answer ends the storage checks.
func (d *doctor) storageError(name, what string, err error) {
	var timeout interface{ Timeout() bool }
	if errors.As(err, &timeout) && timeout.Timeout() || errors.Is(err, context.DeadlineExceeded) {
		d.storage, d.why = false, "the storage stopped answering"
		d.add(name, statusFail, fmt.Sprintf("%s: the storage stopped answering: %s", what, cause(err)),
			fmt.Sprintf("see the endpoint lines above; doctor gives the storage --timeout %s in all", d.a.timeout), &errorFacts{Error: err.Error()})
		return
	}
	d.add(name, statusFail, fmt.Sprintf("%s: %s", what, cause(err)), "", &errorFacts{Error: err.Error()})
}

// checkRekey tells whether a rekey was interrupted: its progress record
// is there, with how far it got and the command that resumes it.
func (d *doctor) checkRekey(ctx context.Context) {
	st := d.storeFor(ctx, checkRekey) // keyless, the record is seen, not read
	if st == nil {
		return
	}
	i, err := rekey.ReadProgress(ctx, st)
	switch {
	case err != nil:
		d.storageError(checkRekey, "reading rekey's progress record", err)
	case i == nil:
		d.add(checkRekey, statusOK, "no rekey unfinished", "", nil)
	default:
		f := &objectFacts{Object: store.Prefix + rekey.ProgressName}
		hint := "until it finishes, objects it has not reached open only with the old key; verify counts them as pending"
		d.add(checkRekey, statusWarn, rekeyNote(i), hint, f)
	}
}
