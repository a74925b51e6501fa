package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/store"
)

// Reasons verify gives for an object that does not open.
const (
	reasonWrongKey = "wrong key"
	reasonTampered = "tampered"
	// reasonUnauthenticated: the object decrypts but no configured identity
	// authenticates it: forged with a public recipient, or sealed by a
	// writer whose identity is not configured (opened with a recovery key).
	reasonUnauthenticated = "unauthenticated"
	reasonNotEnvelope     = "not an envelope"
	reasonNameMismatch    = "name mismatch"
	reasonTruncated       = "truncated"
	reasonTooLarge        = "too large"
	reasonBadName         = "invalid name"
	reasonUnreadable      = "unreadable"
)

// More reasons: an object bound to another store, one sealed under a newer
// manifest generation than the store's (its manifest was rolled back).
const (
	reasonForeignStore = "another store"
	reasonRolledBack   = "manifest rolled back"
)

// reason classifies why an object did not open. The most specific cause is
// tested first: a name mismatch is also a kind of tampering.
func reason(err error) string {
	switch {
	case errors.Is(err, envelope.ErrForeignStore):
		return reasonForeignStore
	case errors.Is(err, store.ErrRolledBack):
		return reasonRolledBack
	case errors.Is(err, envelope.ErrNameMismatch):
		return reasonNameMismatch
	case errors.Is(err, envelope.ErrNoMatchingIdentity):
		return reasonWrongKey
	case errors.Is(err, envelope.ErrTruncated):
		return reasonTruncated
	case errors.Is(err, envelope.ErrNotEnvelope):
		return reasonNotEnvelope
	case errors.Is(err, envelope.ErrUnauthenticated):
		return reasonUnauthenticated
	case errors.Is(err, envelope.ErrTampered):
		return reasonTampered
	case errors.Is(err, store.ErrTooLarge):
		return reasonTooLarge
	case errors.Is(err, store.ErrInvalidName):
		return reasonBadName
	default:
		return reasonUnreadable
	}
}

// findingOutsideSet: an object that opens but needs a rekey.
const findingOutsideSet = "sealed to recipients other than the store's"

type verifyDoc struct {
	OK      bool `json:"ok"`
	Checked int  `json:"checked"`
	// Store is the store's manifest.
	Store  *storeDoc    `json:"store"`
	Failed []failureDoc `json:"failed"`
	// Findings are objects that open but that a rekey should rewrite.
	Findings []failureDoc `json:"findings"`
	// Recovery is the stock-age check with --recovery-identity.
	Recovery *recoveryDoc `json:"recovery,omitempty"`
	// Pending are the objects an interrupted rekey has not re-sealed yet:
	// they open only with the old keys, which is no failure (Rekey says
	// how to finish).
	Pending []string        `json:"pending"`
	Rekey   *interruptedDoc `json:"rekey_interrupted,omitempty"`
}

type failureDoc struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
	Error  string `json:"error"`
	// PutBack names the versions of a put-back object.
	PutBack *putBackDoc `json:"put_back,omitempty"`
}

// putBackDoc is a put-back object's versions in verify --json.
type putBackDoc struct {
	Current string `json:"current"`
	Newer   string `json:"newer"`
	Deleted bool   `json:"deleted"`
}

// reasonPutBack: an object older than a version its history keeps.
const reasonPutBack = "put back"

type recoveryDoc struct {
	Checked   int          `json:"checked"`
	Recovered int          `json:"recovered"`
	Failed    []failureDoc `json:"failed"`
}

// runVerify opens every object, the reserved ones (the manifest, the
// lock's, the migration log) included, and reports each one that does not
// open and why — another store's, one sealed under a newer generation of
// the manifest than the store's (the manifest was rolled back: both
// generations named), a wrong key, tampering —, and the ones that open
// but need a rekey: objects sealed to recipients outside the store's set. With --recovery-identity FILE it also reads every object whole with
// the stock age parser and that key, reporting each one it cannot: the
// proof that the recovery promise holds. It exits 1 if anything was
// reported. Objects that vanish between the listing and the read (the
// lock, released meanwhile) are not reported. Reads are bounded by count
// and by bytes in flight.
func runVerify(ctx context.Context, a *app, args []string) error {
	fs := a.flags("verify")
	a.recoveryFlags(fs, false)
	if _, err := a.parse(fs, args, 0, 0); err != nil {
		return err
	}
	k, err := a.loadKeys(true)
	if err != nil {
		return err
	}
	st, err := a.connect(ctx, keys{identities: k.identities, recipients: k.recipients})
	if err != nil {
		return err
	}
	doc := verifyDoc{Failed: []failureDoc{}, Findings: []failureDoc{}, Pending: []string{}}
	m, _ := storeadmin.Manifest(st)
	interrupted := a.interruptedRekey(ctx, st)
	doc.Rekey = interruptedOf(interrupted)
	// pending: an object the interrupted rekey had not reached, still
	// sealed to the old set (it does not open with the new keys alone, or
	// opens outside the store's set with the old ones given too).
	pending := func(c storeadmin.Check) bool {
		return interrupted != nil && interrupted.Pending(c.Name) &&
			(c.Err != nil && reason(c.Err) == reasonWrongKey || c.Err == nil && c.OutsideSet)
	}
	sd := storeOf(m)
	doc.Store = &sd
	if len(k.recovery) > 0 {
		doc.Recovery = &recoveryDoc{Failed: []failureDoc{}}
	}
	err = storeadmin.Verify(ctx, st, storeadmin.VerifyOptions{Recovery: k.recovery}, func(c storeadmin.Check) error {
		doc.Checked++
		switch {
		case pending(c):
			doc.Pending = append(doc.Pending, c.Name)
		case c.Err != nil:
			doc.Failed = append(doc.Failed, failureDoc{Name: c.Name, Reason: reason(c.Err), Error: c.Err.Error()})
		case c.PutBack != nil:
			cur, newer, deleted, _ := storeadmin.PutBackOf(c.PutBack)
			doc.Failed = append(doc.Failed, failureDoc{Name: c.Name, Reason: reasonPutBack, Error: c.PutBack.Error(),
				PutBack: &putBackDoc{Current: cur.String(), Newer: newer.String(), Deleted: deleted}})
		case c.OutsideSet:
			doc.Findings = append(doc.Findings, failureDoc{Name: c.Name, Reason: "outside the store's recipients", Error: findingOutsideSet})
		}
		if c.RecoveryChecked {
			doc.Recovery.Checked++
			if c.RecoveryErr != nil {
				doc.Recovery.Failed = append(doc.Recovery.Failed, failureDoc{Name: c.Name, Reason: reason(c.RecoveryErr), Error: c.RecoveryErr.Error()})
			} else {
				doc.Recovery.Recovered++
			}
		}
		return nil
	})

	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	byName := func(x, y failureDoc) int { return strings.Compare(x.Name, y.Name) }
	slices.SortFunc(doc.Failed, byName)
	slices.SortFunc(doc.Findings, byName)
	slices.Sort(doc.Pending)
	if doc.Recovery != nil {
		slices.SortFunc(doc.Recovery.Failed, byName)
	}
	recoveryFailed := doc.Recovery != nil && len(doc.Recovery.Failed) > 0
	doc.OK = len(doc.Failed) == 0 && len(doc.Findings) == 0 && len(doc.Pending) == 0 && interrupted == nil && !recoveryFailed
	if a.json {
		a.emit(doc)
	} else {
		a.printf("store %s: generation %d, lock mode %s, %s, created %s\n", m.ID, m.Generation, m.LockMode, plural(len(m.Recipients), "recipient"), timestamp(m.Created))
		for _, f := range doc.Failed {
			a.printf("FAIL %s: %s (%s)\n", shown(f.Name), f.Reason, terminalSafe(f.Error))
		}
		for _, f := range doc.Findings {
			a.printf("REKEY %s: %s\n", shown(f.Name), f.Error)
		}
		if doc.Recovery != nil {
			for _, f := range doc.Recovery.Failed {
				a.printf("NOT RECOVERABLE %s: %s (%s)\n", shown(f.Name), f.Reason, terminalSafe(f.Error))
			}
		}
		if interrupted != nil {
			a.printf("%s; %s pending (not re-sealed yet: not failures)\n", rekeyNote(interrupted), plural(len(doc.Pending), "object"))
		}
		a.printf("verified %s: %d ok, %d failed, %d to re-seal (cairn-state rekey), %d pending\n", plural(doc.Checked, "object"),
			doc.Checked-len(doc.Failed)-len(doc.Findings)-len(doc.Pending), len(doc.Failed), len(doc.Findings), len(doc.Pending))
		if doc.Recovery != nil {
			a.printf("recovery key: stock age read %d of %d objects whole\n", doc.Recovery.Recovered, doc.Recovery.Checked)
		}
	}
	if !doc.OK {
		msg := fmt.Sprintf("verify: %d of %d objects failed", len(doc.Failed), doc.Checked)
		if interrupted != nil {
			msg += fmt.Sprintf(", %d pending: %s", len(doc.Pending), rekeyNote(interrupted))
		}
		if len(doc.Findings) > 0 {
			msg += fmt.Sprintf(", %d need a rekey", len(doc.Findings))
		}
		if recoveryFailed {
			msg += fmt.Sprintf(", %d cannot be read with the recovery key", len(doc.Recovery.Failed))
		}
		return &reportedError{msg: msg}
	}
	return nil
}
