package store

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cairnhq/state/envelope"
)

// ManifestName is the reserved state name of the store's manifest, its
// identity: <root>/.cairn-state/.store (docs/adr/0021).
const ManifestName = ".store"

// The store formats a [Manifest] records.
const (
	// FormatLegacy is the format of a store that existed before it had a
	// manifest: objects bound to no store (envelope format v1, or v2
	// sealed by an unbound envelope) may still be in it, and open. A
	// rekey that rewrote every object moves the store to FormatBound.
	FormatLegacy = 1
	// FormatBound is the format of a store whose every object is bound to
	// its id: an object bound to no store is refused
	// (envelope.ErrLegacyFormat). New stores start here.
	FormatBound = 2
)

// manifestVersion is the version of the manifest's JSON record.
const manifestVersion = 1

// Manifest is a store's identity, kept sealed in .cairn-state/.store: who
// the store is and which keys it belongs to. It is written once, when the
// store is created (or, for a store older than manifests, at its first
// write-capable open), and rewritten only by a rekey.
type Manifest struct {
	// ID is the store id every object of the store is bound to. Its first
	// 6 bytes are the creation time in Unix milliseconds, the other 10 are
	// random (docs/adr/0021).
	ID envelope.StoreID
	// Format is FormatLegacy or FormatBound.
	Format int
	// Created is when the store (or its manifest, for an upgraded store)
	// was created, on the creating process's clock.
	Created time.Time
	// Recipients are the text forms (envelope.RecipientString) of the
	// recipients every object is sealed to, sorted and without
	// duplicates: public recipients only.
	Recipients []string
	// Generation counts the store's recipient sets: 1 at creation, one
	// more at every rekey that changes the set.
	Generation uint64
}

// manifestRecord is the JSON form of a Manifest.
type manifestRecord struct {
	Version    int              `json:"cairn_state_store"`
	ID         envelope.StoreID `json:"id"`
	Format     int              `json:"format"`
	Created    time.Time        `json:"created"`
	Recipients []string         `json:"recipients"`
	Generation uint64           `json:"generation"`
}

// maxManifestRecipients bounds the recipient set a manifest may list.
const maxManifestRecipients = 64

// encodeManifest returns the plaintext of .store for m.
func encodeManifest(m Manifest) ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	return json.Marshal(manifestRecord{Version: manifestVersion, ID: m.ID, Format: m.Format,
		Created: m.Created.UTC(), Recipients: m.Recipients, Generation: m.Generation})
}

// decodeManifest parses the plaintext of .store. Its errors describe what
// is wrong without quoting the record.
func decodeManifest(data []byte) (Manifest, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var r manifestRecord
	if err := dec.Decode(&r); err != nil {
		return Manifest{}, fmt.Errorf("not a manifest record: %s", describeJSONError(err))
	}
	if dec.More() {
		return Manifest{}, fmt.Errorf("not a manifest record: data after the JSON object")
	}
	if r.Version != manifestVersion {
		return Manifest{}, fmt.Errorf("manifest record version %d, this cairn-state reads version %d (written by a newer cairn-state?)", r.Version, manifestVersion)
	}
	m := Manifest{ID: r.ID, Format: r.Format, Created: r.Created, Recipients: r.Recipients, Generation: r.Generation}
	if err := m.validate(); err != nil {
		return Manifest{}, err
	}
	return m, nil
}

// validate checks what every manifest must satisfy.
func (m Manifest) validate() error {
	switch {
	case m.ID.IsZero():
		return fmt.Errorf("the manifest has no store id")
	case m.Format != FormatLegacy && m.Format != FormatBound:
		return fmt.Errorf("unknown store format %d (this cairn-state knows %d and %d)", m.Format, FormatLegacy, FormatBound)
	case m.Created.IsZero():
		return fmt.Errorf("the manifest has no creation time")
	case m.Generation == 0:
		return fmt.Errorf("the manifest's key generation is 0, want at least 1")
	case len(m.Recipients) == 0:
		return fmt.Errorf("the manifest lists no recipient")
	case len(m.Recipients) > maxManifestRecipients:
		return fmt.Errorf("the manifest lists %d recipients, more than %d", len(m.Recipients), maxManifestRecipients)
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

// Equal reports whether m and o record the same identity.
func (m Manifest) Equal(o Manifest) bool {
	return m.ID == o.ID && m.Format == o.Format && m.Created.Equal(o.Created) &&
		m.Generation == o.Generation && slices.Equal(m.Recipients, o.Recipients)
}

// String describes the manifest for messages: id, format, generation and
// the number of recipients.
func (m Manifest) String() string {
	return fmt.Sprintf("store %s (format %d, key generation %d, %d recipients, created %s)",
		m.ID, m.Format, m.Generation, len(m.Recipients), m.Created.UTC().Format(time.RFC3339))
}

// newStoreID draws a store id whose first 6 bytes are now in Unix
// milliseconds (as UUIDv7 does) and whose other 10 bytes are random: an
// identity that cannot open a store's manifest can still be told when the
// store was created.
func newStoreID(now time.Time) envelope.StoreID {
	var id envelope.StoreID
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(now.UnixMilli()))
	copy(id[:6], ms[2:])
	rand.Read(id[6:])
	return id
}

// StoreIDTime returns the creation time a store id made by this package
// carries in its first 6 bytes. It is not authenticated when the id was
// only peeked from an object, and it is meaningless for ids made
// otherwise (envelope.NewStoreID): ok is false when the time is not
// between 2020 and a day from now.
func StoreIDTime(id envelope.StoreID) (t time.Time, ok bool) {
	var ms [8]byte
	copy(ms[2:], id[:6])
	t = time.UnixMilli(int64(binary.BigEndian.Uint64(ms[:]))).UTC()
	if t.Before(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)) || t.After(time.Now().Add(24*time.Hour)) {
		return time.Time{}, false
	}
	return t, true
}

// recipientTexts returns the sorted, deduplicated text forms of a list.
func sortedUnique(texts []string) []string {
	out := slices.Clone(texts)
	slices.Sort(out)
	return slices.Compact(out)
}

// shortRecipient abbreviates a recipient's text form for messages:
// recipients are public, but long (SSH keys, post-quantum keys).
func shortRecipient(t string) string {
	if len(t) <= 24 {
		return t
	}
	if i := strings.IndexByte(t, ' '); i > 0 && i < 20 { // ssh-ed25519 AAAA…
		return t[:min(len(t), i+13)] + "…"
	}
	return t[:16] + "…" + t[len(t)-6:]
}
