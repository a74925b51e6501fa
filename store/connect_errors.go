package store

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cairnhq/state/envelope"
)

// The errors of a store's identity (docs/adr/0021).
var (
	// ErrNotMember means the configured identities do not belong to the
	// store: none of them opens its manifest (.cairn-state/.store), or,
	// for a store older than manifests, any of the objects tried. Nothing
	// was written and the lock was not touched. The error is a
	// [*NotMemberError].
	ErrNotMember = errors.New("this identity does not belong to this store")

	// ErrBadManifest means the store's manifest exists but is not one:
	// garbage, tampered, a record this version cannot read, or missing
	// while the store's objects say the store had one. Connect neither
	// re-creates nor overwrites it. The error is a [*ManifestError].
	ErrBadManifest = errors.New("the store's manifest (.cairn-state/.store) is damaged")

	// ErrNoManifest means a write through a store that has no manifest
	// and was connected without ConnectOptions.Create (or with recovery
	// identities only): such a store is read-only.
	ErrNoManifest = errors.New("the store has no manifest and was connected read-only")

	// ErrManifestChanged means CommitManifest found .store changed since
	// it was read (another process created or re-keyed the store
	// meanwhile): nothing was written. Connect again.
	ErrManifestChanged = errors.New("the store's manifest changed since it was read")
)

// NotMemberError is the error of connecting with identities that do not
// belong to the store. It matches [ErrNotMember] with errors.Is, and
// unwraps to the envelope's error (envelope.ErrNoIdentity: a wrong key;
// envelope.ErrUnauthenticated: a key the store is sealed to that never
// wrote it, such as a recovery key). Its facts are what anyone can read
// without the key, so they are not authenticated.
type NotMemberError struct {
	// Key is the backend key of the manifest, or, for a store that has
	// none, of the first object that did not open.
	Key string
	// StoreID is the store id the manifest's header carries; zero for a
	// store without a manifest.
	StoreID envelope.StoreID
	// Created is the creation time the store id carries (zero when
	// unknown).
	Created time.Time
	// Recipients is how many recipients the manifest (or the object) is
	// sealed to, as its age header says (0 when unknown).
	Recipients int
	// Tried is how many objects were tried, for a store without a
	// manifest (0 when the manifest was tried).
	Tried int
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
	if e.StoreID.IsZero() {
		return fmt.Sprintf("%v: none of the %s tried opens with the configured identities (%s: %s); %s",
			ErrNotMember, plural(e.Tried, "object"), e.Key, why, todo)
	}
	return fmt.Sprintf("%v: %s (store %s%s) does not open with the configured identities: %s; %s",
		ErrNotMember, e.Key, e.StoreID, fact, why, todo)
}

// Is reports whether target is [ErrNotMember].
func (e *NotMemberError) Is(target error) bool { return target == ErrNotMember }

// Unwrap returns the envelope's error.
func (e *NotMemberError) Unwrap() error { return e.Err }

// ManifestError is the error of a store whose manifest exists but cannot
// be used, or is missing although the store's objects are bound to a
// store. It matches [ErrBadManifest] with errors.Is.
type ManifestError struct {
	// Key is the manifest's backend key.
	Key string
	// Missing reports a manifest that does not exist while objects bound
	// to BoundTo do.
	Missing bool
	// BoundTo is the store id the objects carry, when Missing.
	BoundTo envelope.StoreID
	// Err says what is wrong (an envelope or a record error), when not
	// Missing.
	Err error
}

// Error names the manifest and says what is wrong and what to do.
func (e *ManifestError) Error() string {
	if e.Missing {
		return fmt.Sprintf("%v: %s is missing, but the store's objects are bound to store %s: it was removed; restore it from a backup (nothing was written, no new manifest was made)",
			ErrBadManifest, e.Key, e.BoundTo)
	}
	return fmt.Sprintf("%v: %s: %v; restore it from a backup (it was neither re-created nor overwritten, nothing was written)",
		ErrBadManifest, e.Key, e.Err)
}

// Is reports whether target is [ErrBadManifest].
func (e *ManifestError) Is(target error) bool { return target == ErrBadManifest }

// Unwrap returns the cause.
func (e *ManifestError) Unwrap() error { return e.Err }

// plural is "1 object", "2 objects".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
