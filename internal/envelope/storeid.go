package envelope

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
)

// StoreID identifies one store: 16 random bytes drawn once, when the store
// is created, and authenticated in every object a bound envelope seals
// ([Options.StoreID]), so that an object copied from another store does not
// open. The zero value means "bound to no store" (an unbound envelope).
// A store id is not a secret.
type StoreID [16]byte

// NewStoreID returns a random store id from crypto/rand.
func NewStoreID() StoreID {
	var id StoreID
	rand.Read(id[:]) // never fails (crypto/rand, Go 1.24+)
	return id
}

// ParseStoreID parses the text form [StoreID.String] returns: 32
// hexadecimal digits (either case; surrounding space is trimmed). The zero
// id names no store and is refused. Errors wrap [ErrInvalidStoreID].
func ParseStoreID(s string) (StoreID, error) {
	var id StoreID
	t := strings.TrimSpace(s)
	if len(t) != 2*len(id) {
		return id, fmt.Errorf("%w %q: want %d hexadecimal digits, got %d characters", ErrInvalidStoreID, shorten(t, 40), 2*len(id), len(t))
	}
	if _, err := hex.Decode(id[:], []byte(t)); err != nil {
		return StoreID{}, fmt.Errorf("%w %q: not hexadecimal", ErrInvalidStoreID, t)
	}
	if id.IsZero() {
		return id, fmt.Errorf("%w: the all-zero store id means bound to no store", ErrInvalidStoreID)
	}
	return id, nil
}

// String returns the id as 32 lower-case hexadecimal digits.
func (id StoreID) String() string { return hex.EncodeToString(id[:]) }

// IsZero reports whether id is the zero value: bound to no store.
func (id StoreID) IsZero() bool { return id == StoreID{} }

// MarshalText implements [encoding.TextMarshaler] with the form of
// [StoreID.String].
func (id StoreID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText implements [encoding.TextUnmarshaler] with
// [ParseStoreID]; like it, it refuses the zero id.
func (id *StoreID) UnmarshalText(b []byte) error {
	got, err := ParseStoreID(string(b))
	if err != nil {
		return err
	}
	*id = got
	return nil
}

// describe names the id in messages: its text, or that it is unbound.
func (id StoreID) describe() string {
	if id.IsZero() {
		return "none (unbound)"
	}
	return id.String()
}
