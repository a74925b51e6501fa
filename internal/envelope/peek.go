package envelope

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// FixedHeaderLen is the length of the fixed part of a sealed object's
// header, the part before its name: what [PeekStamp] needs, and what a
// ranged read of an object's first bytes fetches to learn its stamp.
const FixedHeaderLen = fixedLen

// PeekStamp reads the stamp of a sealed object from its first bytes,
// prefix (at least [FixedHeaderLen] of them; more are ignored), WITHOUT
// AUTHENTICATING IT: anyone who can write the storage can put any stamp
// there. It is for naming an object (the store keeps a version of it in
// history under the id its stamp gives) without reading it whole, never
// for judging whether it is genuine or current: that takes the stamp an
// opened object's header authenticates ([Opened].Stamp). name only labels
// errors: [ErrTruncated] for fewer bytes than the fixed header,
// [ErrNotEnvelope] for another format.
func PeekStamp(name string, prefix []byte) (Stamp, error) {
	if len(prefix) < len(magic) || string(prefix[:len(magic)]) != magic {
		if len(prefix) < len(magic) && bytes.HasPrefix([]byte(magic), prefix) {
			return Stamp{}, fmt.Errorf("%w: object %q: %d bytes, shorter than a header", ErrTruncated, name, len(prefix))
		}
		return Stamp{}, fmt.Errorf("%w: object %q lacks the %q magic", ErrNotEnvelope, name, magic)
	}
	if len(prefix) <= offVersion {
		return Stamp{}, fmt.Errorf("%w: object %q: %d bytes, shorter than a header", ErrTruncated, name, len(prefix))
	}
	if v := int(prefix[offVersion]); v != formatVersion {
		return Stamp{}, fmt.Errorf("%w: object %q has format version %d; this build reads version %d only", ErrNotEnvelope, name, v, formatVersion)
	}
	if len(prefix) < fixedLen {
		return Stamp{}, fmt.Errorf("%w: object %q: %d bytes, shorter than a header", ErrTruncated, name, len(prefix))
	}
	return Stamp{
		Generation: binary.BigEndian.Uint64(prefix[offGeneration:]),
		Epoch:      binary.BigEndian.Uint64(prefix[offEpoch:]),
		Sequence:   binary.BigEndian.Uint64(prefix[offSequence:]),
	}, nil
}
