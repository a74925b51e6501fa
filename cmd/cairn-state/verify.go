package main

import (
	"context"
	"errors"
	"fmt"

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

// reason classifies why an object did not open. The most specific cause is
// tested first: a name mismatch is also a kind of tampering.
func reason(err error) string {
	switch {
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

type verifyDoc struct {
	OK      bool         `json:"ok"`
	Checked int          `json:"checked"`
	Failed  []failureDoc `json:"failed"`
}

type failureDoc struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
	Error  string `json:"error"`
}

// verifyBatch bounds how many opened objects verify keeps in memory.
const verifyBatch = 256

// runVerify opens every object, the reserved ones (lock, migration log)
// included, and reports each one that does not open and why. It exits 1 if
// any failed. Objects that vanish between the listing and the read (the
// lock, released meanwhile) are not failures.
func runVerify(ctx context.Context, a *app, args []string) error {
	fs := a.flags("verify")
	if _, err := a.parse(fs, args, 0, 0); err != nil {
		return err
	}
	st, err := a.openStore(ctx, true)
	if err != nil {
		return err
	}
	st = st.Internal()
	var names []string
	if err := st.List(ctx, "", func(i store.Info) error {
		names = append(names, i.Name)
		return nil
	}); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	doc := verifyDoc{Failed: []failureDoc{}}
	for start := 0; start < len(names); start += verifyBatch {
		batch := names[start:min(start+verifyBatch, len(names))]
		items, _ := st.GetMany(ctx, batch, nil)
		for _, it := range items {
			switch {
			case it.Err == nil:
				doc.Checked++
			case errors.Is(it.Err, store.ErrNotFound):
				// Gone since the listing.
			case ctx.Err() != nil:
				return fmt.Errorf("verify: %w", ctx.Err())
			default:
				doc.Checked++
				doc.Failed = append(doc.Failed, failureDoc{Name: it.Name, Reason: reason(it.Err), Error: it.Err.Error()})
			}
		}
	}
	doc.OK = len(doc.Failed) == 0
	if a.json {
		a.emit(doc)
	} else {
		for _, f := range doc.Failed {
			a.printf("FAIL %s: %s (%s)\n", f.Name, f.Reason, f.Error)
		}
		a.printf("verified %s: %d ok, %d failed\n", plural(doc.Checked, "object"), doc.Checked-len(doc.Failed), len(doc.Failed))
	}
	if !doc.OK {
		return &reportedError{msg: fmt.Sprintf("verify: %d of %d objects failed", len(doc.Failed), doc.Checked)}
	}
	return nil
}
