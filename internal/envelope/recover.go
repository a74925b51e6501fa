package envelope

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"filippo.io/age"
)

// Recover proves the recovery promise for one sealed object: it strips the
// envelope header and decrypts the age part
// with the stock age parser, [age.Decrypt], and identities — exactly what
// `age -d` does after the header-strip command of the README — reading the
// whole payload, so that every chunk is checked. The plaintext goes to dst
// only if dst is not nil; with a nil dst it is discarded and never held
// whole in memory. Recover does not authenticate the object (stock age
// cannot); name only labels errors.
//
// Errors, naming the object and saying why: [ErrTooLarge],
// [ErrNotEnvelope], [ErrTruncated] or [ErrTampered] when the envelope
// header cannot be stripped; [ErrNoMatchingIdentity] (wrapping
// *age.NoIdentityMatchError) when no identity matches a recipient stanza;
// [ErrTampered] with age's own message when age refuses the header, the
// header MAC or a payload chunk; and dst's write error.
func Recover(name string, sealed []byte, dst io.Writer, identities ...age.Identity) error {
	if len(identities) == 0 {
		return fmt.Errorf("%w: recovering object %q: no identity given", ErrInvalidIdentity, name)
	}
	for i, id := range identities {
		if err := checkIdentity(id); err != nil {
			return fmt.Errorf("%w: recovering object %q: identity #%d: %w", ErrInvalidIdentity, name, i, err)
		}
	}
	hdr, err := parseHeader(name, sealed)
	if err != nil {
		return err
	}
	r, err := age.Decrypt(bytes.NewReader(hdr.age), identities...)
	if err != nil {
		var noMatch *age.NoIdentityMatchError
		if errors.As(err, &noMatch) {
			return fmt.Errorf("%w: recovering object %q with stock age (sealed to %v): %w", ErrNoMatchingIdentity, name, noMatch.StanzaTypes, err)
		}
		return fmt.Errorf("%w: recovering object %q: stock age refuses it: %w", ErrTampered, name, err)
	}
	if dst == nil {
		dst = io.Discard
	}
	var werr error
	if _, err := io.Copy(writerFunc(func(p []byte) (int, error) {
		n, err := dst.Write(p)
		werr = err
		return n, err
	}), r); err != nil {
		if werr != nil {
			return fmt.Errorf("recovering object %q: writing the plaintext: %w", name, werr)
		}
		return fmt.Errorf("%w: recovering object %q: stock age refuses its payload: %w", ErrTampered, name, err)
	}
	return nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
