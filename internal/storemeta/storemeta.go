// Package storemeta holds the store's facts that cairn-state's own packages
// read and an application never does: the manifest (the store's identity,
// docs/adr/0031), the lock modes it records, and how a configuration's
// recipients differ from the store's. Package store makes and checks them;
// internal/storeadmin hands them out (docs/adr/0052).
package storemeta

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cairnhq/state/internal/envelope"
)

// ManifestName is the reserved state name of the store's manifest, its
// identity: <root>/.cairn-state/.store (docs/adr/0021).
const ManifestName = ".store"

// LockName is the reserved state name of the lock object of package
// lock's compare-and-swap mode: <root>/.cairn-state/.lock (docs/adr/0019).
// Its claims and epoch markers are below .lock.d/.
const LockName = ".lock"

// MigrationLogName is the reserved state name of the migration log
// package migrate keeps (docs/adr/0033).
const MigrationLogName = ".migrations"

// The lock modes a [Manifest] records: how every instance of the store
// takes its lock, decided once, when the store is created, from what the
// storage did then (the names of the lock package's modes).
const (
	// LockModeCAS is the lock as one object written with compare-and-swap:
	// the storage enforced conditional writes when the store was created.
	LockModeCAS = "compare-and-swap"
	// LockModeClaims is the claims protocol, for storage without
	// conditional writes (Garage).
	LockModeClaims = "claims"
)

// Manifest is a store's identity, kept sealed in .cairn-state/.store: who
// the store is, which keys it belongs to, how its lock works and which of
// its reserved objects must exist. It is written when the store is
// created and rewritten, one generation up, by a rekey to another set and
// when the migration log is first written (docs/adr/0031).
type Manifest struct {
	// ID is the store id every object of the store is bound to. Its first
	// 6 bytes are the creation time in Unix milliseconds, the other 10 are
	// random (docs/adr/0021).
	ID envelope.StoreID
	// Created is when the store was created, on the creating process's
	// clock.
	Created time.Time
	// Recipients are the text forms (envelope.RecipientString) of the
	// recipients every object is sealed to, sorted and without
	// duplicates: public recipients only.
	Recipients []string
	// Generation counts the manifest's versions: 1 at creation, one more
	// at every rewrite (a rekey to another recipient set, the migration
	// log's first write).
	// Every object's authenticated header names the generation it was
	// sealed under; an object of a newer generation than the manifest
	// read means the manifest was rolled back (store.ErrRolledBack).
	Generation uint64
	// LockMode is the store's lock mode, [LockModeCAS] or
	// [LockModeClaims], decided at creation from the storage's
	// capabilities; every open uses it without probing the storage.
	LockMode string
	// Storage says what the lock mode was decided from: the S3 backend's
	// conditional-write probe's findings, a URL that forced the mode, or
	// a backend whose capabilities are fixed.
	Storage string
	// MigrationLog records that the migration log (.cairn-state/.migrations)
	// exists: once set, a missing log is refused instead of being taken
	// for a fresh store.
	MigrationLog bool
	// CopySourceConditions records that the storage enforced a server-side
	// copy's source condition when the store was created
	// (backend.Capabilities.CopySourceConditions; the S3 copy probe,
	// docs/adr/0041): history keeps versions by conditional copies, and
	// every open adopts it with the lock mode instead of probing again.
	// False, or absent in a manifest written before it was recorded:
	// copies are sent unconditionally and checked (docs/adr/0040).
	CopySourceConditions bool
}

// ConditionalWrites reports whether the manifest's lock mode relies on
// the storage's conditional writes.
func (m Manifest) ConditionalWrites() bool { return m.LockMode == LockModeCAS }

// MaxRecipients bounds the recipient set a manifest may list.
const MaxRecipients = 64

// MaxStorageText bounds Manifest.Storage.
const MaxStorageText = 1024

// Validate checks what every manifest must satisfy.
func (m Manifest) Validate() error {
	switch {
	case m.ID.IsZero():
		return fmt.Errorf("the manifest has no store id")
	case m.LockMode != LockModeCAS && m.LockMode != LockModeClaims:
		return fmt.Errorf("unknown lock mode (this cairn-state knows %q and %q)", LockModeCAS, LockModeClaims)
	case len(m.Storage) > MaxStorageText:
		return fmt.Errorf("the manifest's storage description is %d bytes, more than %d", len(m.Storage), MaxStorageText)
	case m.Created.IsZero():
		return fmt.Errorf("the manifest has no creation time")
	case m.Generation == 0:
		return fmt.Errorf("the manifest's key generation is 0, want at least 1")
	case len(m.Recipients) == 0:
		return fmt.Errorf("the manifest lists no recipient")
	case len(m.Recipients) > MaxRecipients:
		return fmt.Errorf("the manifest lists %d recipients, more than %d", len(m.Recipients), MaxRecipients)
	case !slices.IsSorted(m.Recipients) || len(slices.Compact(slices.Clone(m.Recipients))) != len(m.Recipients):
		return fmt.Errorf("the manifest's recipients are not sorted and unique")
	}
	for i, t := range m.Recipients {
		if _, err := envelope.ParseRecipient(t); err != nil {
			// ParseRecipient's errors quote nothing secret.
			return fmt.Errorf("the manifest's recipient #%d: %w", i, err)
		}
	}
	return nil
}

// Equal reports whether m and o record the same facts.
func (m Manifest) Equal(o Manifest) bool {
	return m.ID == o.ID && m.Created.Equal(o.Created) && m.Generation == o.Generation &&
		slices.Equal(m.Recipients, o.Recipients) && m.LockMode == o.LockMode &&
		m.Storage == o.Storage && m.MigrationLog == o.MigrationLog && m.CopySourceConditions == o.CopySourceConditions
}

// String describes the manifest for messages: id, generation, lock mode
// and the number of recipients.
func (m Manifest) String() string {
	return fmt.Sprintf("store %s (generation %d, lock mode %s, %d recipients, created %s)",
		m.ID, m.Generation, m.LockMode, len(m.Recipients), m.Created.UTC().Format(time.RFC3339))
}

// RecipientDiff is how a configuration's recipients differ from a store's.
type RecipientDiff struct {
	// NotSealedTo are configured recipients — the identities' own and the
	// extra ones — that the store does not seal to: nothing written now
	// is sealed to them, and an identity among them only reads.
	NotSealedTo []string
	// NotConfigured are recipients the store seals to that the
	// configuration does not name: everything written is still sealed to
	// them.
	NotConfigured []string
}

// Empty reports whether the configuration and the store agree.
func (d RecipientDiff) Empty() bool { return len(d.NotSealedTo) == 0 && len(d.NotConfigured) == 0 }

// String describes the difference, recipients abbreviated.
func (d RecipientDiff) String() string {
	short := func(ts []string) string {
		out := make([]string, len(ts))
		for i, t := range ts {
			out[i] = ShortRecipient(t)
		}
		return strings.Join(out, ", ")
	}
	var parts []string
	if len(d.NotSealedTo) > 0 {
		parts = append(parts, "configured but not recipients of the store: "+short(d.NotSealedTo))
	}
	if len(d.NotConfigured) > 0 {
		parts = append(parts, "recipients of the store not configured here: "+short(d.NotConfigured))
	}
	return strings.Join(parts, "; ")
}

// ShortRecipient abbreviates a recipient's text form for messages:
// recipients are public, but long (SSH keys, post-quantum keys).
func ShortRecipient(t string) string {
	if len(t) <= 24 {
		return t
	}
	if i := strings.IndexByte(t, ' '); i > 0 && i < 20 { // ssh-ed25519 AAAA…
		return t[:min(len(t), i+13)] + "…"
	}
	return t[:16] + "…" + t[len(t)-6:]
}
