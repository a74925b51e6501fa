package envelope

import (
	"errors"
	"fmt"
)

// Errors returned by [Envelope.Open], [Envelope.Seal] and the parsing
// helpers. They are wrapped with the object's name (and, for
// [ErrNoMatchingIdentity], with age's [*age.NoIdentityMatchError]); test for them
// with [errors.Is].
var (
	// ErrNoMatchingIdentity means none of the configured identities can open the
	// object: it was sealed to other keys (a wrong or rotated-out key).
	// The error also wraps age's *age.NoIdentityMatchError.
	ErrNoMatchingIdentity = errors.New("no configured identity matches the object")

	// ErrTampered means the object is not what a holder of a configured
	// identity sealed: a byte was changed, or it was forged by someone who
	// knows only a public recipient, or its age part is one the stock age
	// tool would refuse.
	ErrTampered = errors.New("object tampered or forged")

	// ErrUnauthenticated means the object decrypts with a configured
	// identity but no configured writer identity authenticates it: it was
	// forged with a public recipient, or sealed by a writer whose identity
	// this envelope does not hold. Errors wrapping
	// ErrUnauthenticated also wrap [ErrTampered]. Only identities given as
	// [Options.Recovery] read such objects.
	ErrUnauthenticated = errors.New("object not authenticated by any configured identity")

	// ErrNotEnvelope means the bytes are not a sealed envelope (wrong magic)
	// or use a format version or feature this package does not know: it
	// reads format 4 only (docs/adr/0064).
	ErrNotEnvelope = errors.New("not a cairn-state envelope")

	// ErrTruncated means the object is shorter than its header says it is.
	ErrTruncated = errors.New("object truncated")

	// ErrNameMismatch means the object is authentic but was sealed for
	// another name: it was copied or moved.
	ErrNameMismatch = errors.New("object sealed for another name")

	// ErrForeignStore means the object belongs to another store than the
	// envelope's ([Options.StoreID]): it carries another store id, or none
	// in a bound envelope, or one in an unbound envelope. Open reports it before
	// trying any key, so it is what an object copied from another store
	// gets whatever it was sealed to. The error is a [*ForeignStoreError].
	ErrForeignStore = errors.New("object belongs to another store")

	// ErrTooLarge means an object or plaintext exceeds [MaxSize].
	ErrTooLarge = errors.New("object too large")

	// ErrInvalidName means a name is empty or longer than [MaxNameLen], or
	// a [Writer] does not fit its field (names longer together than
	// [MaxWriterLen], a process id out of range).
	ErrInvalidName = errors.New("invalid object name")

	// ErrInvalidIdentity means an identity file or key could not be parsed,
	// or an identity cannot be used by an envelope (a zero value, an empty
	// secret, a work factor below [MinWorkFactor]).
	ErrInvalidIdentity = errors.New("invalid identity")

	// ErrInvalidRecipient means a recipient string could not be parsed, or
	// a recipient cannot be used by an envelope.
	ErrInvalidRecipient = errors.New("invalid recipient")

	// ErrInvalidStoreID means a store id's text form could not be parsed.
	ErrInvalidStoreID = errors.New("invalid store id")
)

// ForeignStoreError is the error of opening an object that belongs to
// another store. It matches [ErrForeignStore] with [errors.Is]. Store ids
// are not secrets.
type ForeignStoreError struct {
	// Name is the name the object was opened as.
	Name string
	// Object is the store id the object carries (zero: bound to no store).
	Object StoreID
	// Envelope is the store id of the envelope that refused it (zero:
	// unbound).
	Envelope StoreID
}

// Error says that the object belongs to another store, naming both ids.
func (e *ForeignStoreError) Error() string {
	if e.Object.IsZero() {
		return fmt.Sprintf("object %q belongs to no store (it was sealed by an envelope bound to none); this store is %s",
			e.Name, e.Envelope.describe())
	}
	if e.Envelope.IsZero() {
		return fmt.Sprintf("object %q belongs to a store: it carries store id %s, and this envelope is bound to no store",
			e.Name, e.Object.describe())
	}
	return fmt.Sprintf("object %q belongs to another store: it carries store id %s, this store is %s",
		e.Name, e.Object.describe(), e.Envelope.describe())
}

// Is reports whether target is [ErrForeignStore].
func (e *ForeignStoreError) Is(target error) bool { return target == ErrForeignStore }
