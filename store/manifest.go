package store

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/storemeta"
)

// manifestVersion is the version of the manifest's JSON record.
const manifestVersion = 1

// manifestRecord is the JSON form of a Manifest.
type manifestRecord struct {
	Version              int              `json:"cairn_state_store"`
	ID                   envelope.StoreID `json:"id"`
	Created              time.Time        `json:"created"`
	Recipients           []string         `json:"recipients"`
	Generation           uint64           `json:"generation"`
	LockMode             string           `json:"lock_mode"`
	Storage              string           `json:"storage,omitempty"`
	MigrationLog         bool             `json:"migration_log,omitempty"`
	CopySourceConditions bool             `json:"copy_source_conditions,omitempty"`
}

// encodeManifest returns the plaintext of .store for m.
func encodeManifest(m storemeta.Manifest) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return json.Marshal(manifestRecord{Version: manifestVersion, ID: m.ID, Created: m.Created.UTC(),
		Recipients: m.Recipients, Generation: m.Generation, LockMode: m.LockMode, Storage: m.Storage,
		MigrationLog: m.MigrationLog, CopySourceConditions: m.CopySourceConditions})
}

// decodeManifest parses the plaintext of .store. Its errors describe what
// is wrong without quoting the record.
func decodeManifest(data []byte) (storemeta.Manifest, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var r manifestRecord
	if err := dec.Decode(&r); err != nil {
		return storemeta.Manifest{}, fmt.Errorf("not a manifest record: %s", describeJSONError(err))
	}
	if dec.More() {
		return storemeta.Manifest{}, fmt.Errorf("not a manifest record: data after the JSON object")
	}
	if r.Version != manifestVersion {
		return storemeta.Manifest{}, fmt.Errorf("manifest record version %d, this cairn-state reads version %d (written by a newer cairn-state?)", r.Version, manifestVersion)
	}
	m := storemeta.Manifest{ID: r.ID, Created: r.Created, Recipients: r.Recipients, Generation: r.Generation,
		LockMode: r.LockMode, Storage: r.Storage, MigrationLog: r.MigrationLog, CopySourceConditions: r.CopySourceConditions}
	if err := m.Validate(); err != nil {
		return storemeta.Manifest{}, err
	}
	return m, nil
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

// storeIDTime returns the creation time a store id made by this package
// carries in its first 6 bytes. It is not authenticated when the id was
// only peeked from an object, and it is meaningless for ids made
// otherwise (envelope.NewStoreID): ok is false when the time is not
// between 2020 and a day from now.
func storeIDTime(id envelope.StoreID) (t time.Time, ok bool) {
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
