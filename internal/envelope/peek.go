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

// HeaderLen returns the length of a sealed object's envelope header — the
// bytes before its age file — from its first bytes, prefix (at least
// [FixedHeaderLen] of them), WITHOUT AUTHENTICATING IT: what a reader
// fetches of an object to give [Envelope.OpenHeader]; and the stamp
// [PeekStamp] reads there, as unauthenticated. It fails as [PeekStamp]
// does (with a zero stamp), and with [ErrTampered] for a layout no object
// has (the stamp is still returned beside that error).
func HeaderLen(name string, prefix []byte) (int, Stamp, error) {
	st, err := PeekStamp(name, prefix)
	if err != nil {
		return 0, Stamp{}, err
	}
	n, nameLen, err := keyLayout(name, prefix)
	if err != nil {
		return 0, st, err
	}
	return headerLen(nameLen, n), st, nil
}

// OpenHeader authenticates the envelope header of an object of size
// bytes sealed for name from its first bytes, head — at least
// [HeaderLen] of them — without its age file, and reports what the header
// says: the store id, the recipients digest, the [Stamp] and the [Writer],
// as [Envelope.OpenWithInfo] would (the same errors, in the same order,
// for what it checks). It is how a reader learns who wrote an object
// without reading it whole: one of the envelope's writer identities
// authenticates the header through its stanza, whose associated data
// covers every field, the writer's included. The age file is not checked:
// an object whose payload was altered after its header passes here and
// fails to open. An object with no stanza of ours needs a recovery
// identity ([Options.Recovery]) and its age header in head too (the whole
// object is enough); without them it fails with [ErrTruncated] (a
// recovery identity is configured) or [ErrNoMatchingIdentity] (none is:
// without the age header a wrong key cannot be told from a forgery).
func (e *Envelope) OpenHeader(name string, head []byte, size int64) (Opened, error) {
	hdr, err := parsePrefix(name, head, size)
	if err != nil {
		return Opened{}, err
	}
	if err := e.checkBinding(name, hdr); err != nil {
		return Opened{}, err
	}
	var ageHdr []byte
	if rest := head[hdr.ageOff:]; len(rest) > 0 {
		if h, _, err := splitAge(rest); err == nil {
			ageHdr = h
		}
	}
	fileKey, info, err := e.authenticate(name, hdr, ageHdr, nil, false)
	if err != nil {
		return Opened{}, err
	}
	clear(fileKey)
	return info, nil
}
