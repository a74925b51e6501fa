package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cairnhq/state/envelope"
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

// More reasons: an object bound to another store, a legacy one the store
// no longer accepts.
const (
	reasonForeignStore = "another store"
	reasonLegacy       = "legacy format"
)

// reason classifies why an object did not open. The most specific cause is
// tested first: a name mismatch is also a kind of tampering.
func reason(err error) string {
	switch {
	case errors.Is(err, envelope.ErrForeignStore):
		return reasonForeignStore
	case errors.Is(err, envelope.ErrLegacyFormat):
		return reasonLegacy
	case errors.Is(err, envelope.ErrNameMismatch):
		return reasonNameMismatch
	case errors.Is(err, envelope.ErrNoIdentity):
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

// Findings: objects that open but need a rekey.
const (
	findingLegacy     = "legacy: bound to no store (format v1, or sealed before the store had a manifest)"
	findingOutsideSet = "sealed to recipients other than the store's"
)

type verifyDoc struct {
	OK      bool `json:"ok"`
	Checked int  `json:"checked"`
	// Store is the store's manifest; nil for a store that has none yet.
	Store  *storeDoc    `json:"store"`
	Failed []failureDoc `json:"failed"`
	// Findings are objects that open but that a rekey should rewrite.
	Findings []failureDoc `json:"findings"`
	// Recovery is the stock-age check with --recovery-identity.
	Recovery *recoveryDoc `json:"recovery,omitempty"`
}

type failureDoc struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
	Error  string `json:"error"`
}

type recoveryDoc struct {
	Checked   int          `json:"checked"`
	Recovered int          `json:"recovered"`
	Failed    []failureDoc `json:"failed"`
}

// runVerify opens every object, the reserved ones (the manifest, the
// lock's, the migration log) included, and reports each one that does not
// open and why — another store's, a legacy one the store no longer
// accepts, a wrong key, tampering —, and the ones that open but need a
// rekey: legacy objects, objects sealed to recipients outside the store's
// set. With --recovery-identity FILE it also reads every object whole with
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
	st, err := a.connect(ctx, keys{identities: k.identities, recipients: k.recipients}, false)
	if err != nil {
		return err
	}
	doc := verifyDoc{Failed: []failureDoc{}, Findings: []failureDoc{}}
	m, hasManifest := st.Manifest()
	if hasManifest {
		sd := storeOf(m)
		doc.Store = &sd
	}
	if len(k.recovery) > 0 {
		doc.Recovery = &recoveryDoc{Failed: []failureDoc{}}
	}
	err = st.Verify(ctx, &store.VerifyOptions{Recovery: k.recovery}, func(c store.Check) error {
		doc.Checked++
		switch {
		case c.Err != nil:
			doc.Failed = append(doc.Failed, failureDoc{Name: c.Name, Reason: reason(c.Err), Error: c.Err.Error()})
		case c.Legacy:
			doc.Findings = append(doc.Findings, failureDoc{Name: c.Name, Reason: "legacy", Error: findingLegacy})
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
	if doc.Recovery != nil {
		slices.SortFunc(doc.Recovery.Failed, byName)
	}
	recoveryFailed := doc.Recovery != nil && len(doc.Recovery.Failed) > 0
	doc.OK = len(doc.Failed) == 0 && len(doc.Findings) == 0 && !recoveryFailed
	if a.json {
		a.emit(doc)
	} else {
		if hasManifest {
			a.printf("store %s: format %d, key generation %d, %s, created %s\n", m.ID, m.Format, m.Generation, plural(len(m.Recipients), "recipient"), timestamp(m.Created))
		} else {
			a.printf("store: no manifest yet (.cairn-state/.store; the next write creates it)\n")
		}
		for _, f := range doc.Failed {
			a.printf("FAIL %s: %s (%s)\n", f.Name, f.Reason, f.Error)
		}
		for _, f := range doc.Findings {
			a.printf("REKEY %s: %s\n", f.Name, f.Error)
		}
		if doc.Recovery != nil {
			for _, f := range doc.Recovery.Failed {
				a.printf("NOT RECOVERABLE %s: %s (%s)\n", f.Name, f.Reason, f.Error)
			}
		}
		a.printf("verified %s: %d ok, %d failed, %d to re-seal (cairn-state rekey)\n", plural(doc.Checked, "object"),
			doc.Checked-len(doc.Failed)-len(doc.Findings), len(doc.Failed), len(doc.Findings))
		if doc.Recovery != nil {
			a.printf("recovery key: stock age read %d of %d objects whole\n", doc.Recovery.Recovered, doc.Recovery.Checked)
		}
	}
	if !doc.OK {
		msg := fmt.Sprintf("verify: %d of %d objects failed", len(doc.Failed), doc.Checked)
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
