package storemeta

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cairnhq/state/internal/envelope"
)

// The errors package store returns with facts in them (docs/adr/0062):
// each matches its sentinel with errors.Is, which is what an application
// tests; cairn-state's own packages (the CLI's messages and JSON, doctor)
// read the facts with errors.As.

// The sentinels of the errors below. Package store gives each the same
// value under the same name, and documents it there.
var (
	ErrNotMember       = errors.New("this identity does not belong to this store")
	ErrWrongStore      = errors.New("this is not the pinned store")
	ErrBadManifest     = errors.New("the store's manifest (.cairn-state/.store) is damaged")
	ErrManifestMissing = errors.New("the store's manifest is missing: restore it from a backup")
	ErrNoStore         = errors.New("there is no store at this location")
	ErrStoreExists     = errors.New("a store exists at this location already")
	ErrRolledBack      = errors.New("the store's manifest is older than its objects: it was rolled back")
	ErrInvalidName     = errors.New("invalid state name")
	ErrReservedName    = errors.New("state name is reserved for cairn-state's own objects")
)

// NotMemberError is the error of connecting with identities that do not
// belong to the store. It matches [ErrNotMember] with errors.Is, and
// unwraps to the envelope's error (envelope.ErrNoMatchingIdentity: a wrong key;
// envelope.ErrUnauthenticated: a key the store is sealed to that never
// wrote it, such as a recovery key). Its facts are what anyone can read
// without the key, so they are not authenticated.
type NotMemberError struct {
	// Key is the backend key of the manifest.
	Key string
	// StoreID is the store id the manifest's header carries.
	StoreID envelope.StoreID
	// Created is the creation time the store id carries (zero when
	// unknown).
	Created time.Time
	// Recipients is how many recipients the manifest is sealed to, as
	// its age header says (0 when unknown).
	Recipients int
	// Err is the envelope's error.
	Err error
}

// Error says that the identity does not belong to the store, with the
// store's facts and what to do.
func (e *NotMemberError) Error() string {
	why := "no configured identity is one it is sealed to (wrong key)"
	if errors.Is(e.Err, envelope.ErrUnauthenticated) {
		why = "a configured identity decrypts it but never wrote it (a recovery key?), so it cannot be authenticated"
	}
	var facts []string
	if !e.Created.IsZero() {
		facts = append(facts, "created "+e.Created.UTC().Format(time.RFC3339))
	}
	if e.Recipients > 0 {
		facts = append(facts, plural(e.Recipients, "recipient"))
	}
	fact := ""
	if len(facts) > 0 {
		fact = ", " + strings.Join(facts, ", ")
	}
	const todo = "use an identity this store is sealed to; after a key rotation (cairn-state rekey --identity NEW --old-identity OLD) that is the new one"
	return fmt.Sprintf("%v: %s (store %s%s) does not open with the configured identities: %s; %s",
		ErrNotMember, e.Key, e.StoreID, fact, why, todo)
}

// Is reports whether target is [ErrNotMember].
func (e *NotMemberError) Is(target error) bool { return target == ErrNotMember }

// Unwrap returns the envelope's error.
func (e *NotMemberError) Unwrap() error { return e.Err }

// ManifestError is the error of a store whose manifest exists but cannot
// be used, or is missing while the store holds other objects. It matches
// [ErrBadManifest] with errors.Is, or [ErrManifestMissing] when Missing.
type ManifestError struct {
	// Key is the manifest's backend key.
	Key string
	// Location names the store (store.ConnectOptions.Location; empty when not
	// given).
	Location string
	// Missing reports a manifest that does not exist while Found objects
	// do under the store's prefix.
	Missing bool
	// Found is one of the objects found, when Missing (its state name).
	Found string
	// Err says what is wrong (an envelope or a record error), when not
	// Missing.
	Err error
}

// Error names the manifest and says what is wrong and what to do.
func (e *ManifestError) Error() string {
	if e.Missing {
		return fmt.Sprintf("%v: %s does not exist, but %s holds other objects (%s, …): it was removed; "+
			"restore it from a backup (nothing was written, no new store was made)",
			ErrManifestMissing, e.Key, e.where(), e.Found)
	}
	return fmt.Sprintf("%v: %s: %v; restore it from a backup (it was neither re-created nor overwritten, nothing was written)",
		ErrBadManifest, e.Key, e.Err)
}

func (e *ManifestError) where() string {
	if e.Location != "" {
		return e.Location
	}
	return "the store's prefix"
}

// Is reports whether target is [ErrBadManifest] (a damaged manifest) or
// [ErrManifestMissing] (a missing one).
func (e *ManifestError) Is(target error) bool {
	if e.Missing {
		return target == ErrManifestMissing
	}
	return target == ErrBadManifest
}

// Unwrap returns the cause.
func (e *ManifestError) Unwrap() error { return e.Err }

// NoStoreError is the error of connecting where there is no store. It
// matches [ErrNoStore] with errors.Is.
type NoStoreError struct {
	// Location names the place looked at (store.ConnectOptions.Location, or
	// the key prefix when it was not given).
	Location string
	// Pinned is the store id the connection was pinned to (zero: none).
	Pinned envelope.StoreID
}

// Error names the location and says how a store is created.
func (e *NoStoreError) Error() string {
	if !e.Pinned.IsZero() {
		return fmt.Sprintf("%v: %s holds no store, and the pinned store %s is not created anywhere but by `cairn-state init` "+
			"(is the location right? was the store moved?)", ErrNoStore, e.Location, e.Pinned)
	}
	return fmt.Sprintf("%v: %s holds no store (create one with `cairn-state init`)", ErrNoStore, e.Location)
}

// Is reports whether target is [ErrNoStore].
func (e *NoStoreError) Is(target error) bool { return target == ErrNoStore }

// StoreExistsError is the error of creating a store where one is. It
// matches [ErrStoreExists] with errors.Is.
type StoreExistsError struct {
	// Location names the place (store.ConnectOptions.Location, or the key
	// prefix).
	Location string
	// Found is the store id its manifest's header carries.
	Found envelope.StoreID
}

// Error names the location and the store found.
func (e *StoreExistsError) Error() string {
	return fmt.Sprintf("%v: %s holds store %s; nothing was written", ErrStoreExists, e.Location, e.Found)
}

// Is reports whether target is [ErrStoreExists].
func (e *StoreExistsError) Is(target error) bool { return target == ErrStoreExists }

// WrongStoreError is the error of connecting to a store other than the
// pinned one. It matches [ErrWrongStore] with errors.Is. Its facts are
// read from the manifest's header, without a key.
type WrongStoreError struct {
	// Key is the manifest's backend key.
	Key string
	// Location names the store (store.ConnectOptions.Location; empty when not
	// given).
	Location string
	// Pinned is the store id asked for.
	Pinned envelope.StoreID
	// Found is the store id the manifest's header carries.
	Found envelope.StoreID
	// Created is the creation time Found carries (zero when unknown).
	Created time.Time
}

// Error names both ids and what to do.
func (e *WrongStoreError) Error() string {
	at := e.Key
	if e.Location != "" {
		at = e.Location
	}
	created := ""
	if !e.Created.IsZero() {
		created = ", created " + e.Created.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("%v: %s holds store %s%s, but store %s is pinned; nothing was read or written "+
		"(check the location, or the pinned id: Config.StoreID, --store-id, CAIRN_STATE_STORE_ID)",
		ErrWrongStore, at, e.Found, created, e.Pinned)
}

// Is reports whether target is [ErrWrongStore].
func (e *WrongStoreError) Is(target error) bool { return target == ErrWrongStore }

// RolledBackError is the error of an object sealed under a newer
// generation of the manifest than the store's manifest: the manifest was
// put back from an older copy (which may admit a recipient a rekey
// removed). It matches [ErrRolledBack] with errors.Is.
type RolledBackError struct {
	// Name is the object's state name.
	Name string
	// Object is the generation the object was sealed under.
	Object uint64
	// Manifest is the generation of the manifest read.
	Manifest uint64
}

// Error names both generations and what to do.
func (e *RolledBackError) Error() string {
	return fmt.Sprintf("%v: object %q was sealed under manifest generation %d, but the store's manifest is generation %d; "+
		"restore the newest manifest (.cairn-state/.store) from a backup and find out who can write the bucket",
		ErrRolledBack, e.Name, e.Object, e.Manifest)
}

// Is reports whether target is [ErrRolledBack].
func (e *RolledBackError) Is(target error) bool { return target == ErrRolledBack }

// plural is "1 object", "2 objects".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// NameError is the error for a refused state name. It matches
// [ErrInvalidName] with errors.Is, and also [ErrReservedName] when the name
// is reserved.
type NameError struct {
	// Name is the refused name; empty when it looks like a secret, which
	// is never repeated.
	Name   string
	Reason string // why, in words
	// Reserved reports that the name is well formed but reserved for
	// cairn-state's own objects (it starts with '.').
	Reserved bool
}

// Error names the refused name (cut to 64 bytes, quoted with its control
// characters escaped) and the reason.
func (e *NameError) Error() string {
	if e.Name == "" {
		return "state name: " + e.Reason
	}
	shown := e.Name
	if len(shown) > 64 {
		shown = shown[:64] + "…"
	}
	return fmt.Sprintf("state name %q: %s", shown, e.Reason)
}

// Is makes errors.Is match ErrInvalidName, and ErrReservedName for
// reserved names.
func (e *NameError) Is(target error) bool {
	return target == ErrInvalidName || (e.Reserved && target == ErrReservedName)
}
