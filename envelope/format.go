package envelope

import (
	"bytes"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"golang.org/x/crypto/chacha20poly1305"
)

// The envelope format (docs/adr/0003-envelope-format.md). Version 2, what
// Seal writes:
//
//	offset      size  field
//	0           7     magic "CAIRNST"
//	7           1     version, 0x02
//	8           1     flags: bit 0 = content-bound; other bits zero
//	9           1     n, number of key stanzas (0..16)
//	10          2     L, name length, big-endian (1..1024)
//	12          8     T, total length of the sealed object, big-endian
//	20          16    salt, random per object
//	36          16    store id (all zero: bound to no store)
//	52          32    recipients digest: SHA-256 of the sorted recipient set
//	84          L     name, as given to Seal
//	84+L        40×n  key stanzas: key id (8) || wrapped file key (32)
//	84+L+40n    32    header MAC
//	H=116+L+40n T−H   a complete age-encryption.org/v1 file (binary)
//
// Version 1 (legacy, opened only with Options.AcceptLegacy) has no store id
// and no recipients digest: the name starts at offset 36 and H = 68+L+40n.
const (
	magic          = "CAIRNST"
	flagContent    = 1 << 0
	kidLen         = 8
	wrappedLen     = 16 + chacha20poly1305.Overhead
	stanzaLen      = kidLen + wrappedLen
	macLen         = sha256.Size
	saltLen        = 16
	fileKeyLen     = 16
	digestLen      = sha256.Size
	offVersion     = 7
	offFlags       = 8
	offCount       = 9
	offNameLen     = 10
	offTotal       = 12
	offSalt        = 20
	offStoreID     = 36 // v2
	offRecipients  = 52 // v2
	fixedLenV1     = 36
	fixedLenV2     = 84
	authKeySalt    = "cairn-state/v1"
	labelPrefix    = "cairn-state/v1 "
	infoKeyID      = labelPrefix + "key id"
	maxKeyStanzas  = 16
	maxAgeStanzas  = 64
	ageMagicPrefix = "age-encryption.org/"
)

// The format versions [PeekHeader] and [Opened] report.
const (
	// FormatV1 is the legacy format: bound to the object's name, not to a
	// store. Open accepts it only with [Options.AcceptLegacy].
	FormatV1 = 1
	// FormatV2 is what Seal writes: bound to the name, the store id and the
	// recipient set.
	FormatV2 = 2
)

// MaxSize is the largest sealed object, in bytes, that [Envelope.Seal]
// produces and [Envelope.Open] accepts. Open rejects a larger input with
// [ErrTooLarge] before any other work.
const MaxSize = 64 << 20

// MaxNameLen is the longest object name, in bytes, that an envelope binds.
const MaxNameLen = 1024

// header is a parsed envelope header. Its slices alias the sealed object.
type header struct {
	version    int
	flags      byte
	name       string
	total      uint64
	salt       []byte
	storeID    StoreID  // v2; zero in v1
	recipients [32]byte // v2; zero in v1
	prefix     []byte   // bytes [0, fixed+L): the associated data of every stanza
	stanzas    []byte   // n×stanzaLen bytes
	macked     []byte   // bytes [0, H−32): what the header MAC covers
	mac        []byte
	age        []byte // the age file, bytes [H, T)
}

func fixedLen(version int) int {
	if version == FormatV1 {
		return fixedLenV1
	}
	return fixedLenV2
}

func headerLen(version, nameLen, n int) int {
	return fixedLen(version) + nameLen + n*stanzaLen + macLen
}

// parseHeader checks the layout of sealed (not its authenticity) and
// returns its parts. objName only labels errors.
func parseHeader(objName string, sealed []byte) (*header, error) {
	if len(sealed) > MaxSize {
		return nil, fmt.Errorf("%w: object %q is %d bytes, more than %d", ErrTooLarge, objName, len(sealed), MaxSize)
	}
	if len(sealed) < len(magic)+1 {
		if bytes.HasPrefix([]byte(magic), sealed) { // includes empty
			return nil, fmt.Errorf("%w: object %q is %d bytes, shorter than a header", ErrTruncated, objName, len(sealed))
		}
		return nil, fmt.Errorf("%w: object %q is %d bytes and lacks the %q magic", ErrNotEnvelope, objName, len(sealed), magic)
	}
	if string(sealed[:len(magic)]) != magic {
		hint := ""
		if bytes.HasPrefix(sealed, []byte(ageMagicPrefix)) {
			hint = " (it is a bare age file)"
		}
		return nil, fmt.Errorf("%w: object %q lacks the %q magic%s", ErrNotEnvelope, objName, magic, hint)
	}
	version := int(sealed[offVersion])
	if version != FormatV1 && version != FormatV2 {
		return nil, fmt.Errorf("%w: object %q has format version %d; this build reads versions %d and %d", ErrNotEnvelope, objName, version, FormatV1, FormatV2)
	}
	fixed := fixedLen(version)
	if len(sealed) < fixed {
		return nil, fmt.Errorf("%w: object %q is %d bytes, shorter than a version %d header", ErrTruncated, objName, len(sealed), version)
	}
	flags := sealed[offFlags]
	if flags&^flagContent != 0 {
		return nil, fmt.Errorf("%w: object %q uses unknown flags %#02x", ErrNotEnvelope, objName, flags)
	}
	n := int(sealed[offCount])
	nameLen := int(binary.BigEndian.Uint16(sealed[offNameLen:]))
	total := binary.BigEndian.Uint64(sealed[offTotal:])
	if n > maxKeyStanzas || nameLen == 0 || nameLen > MaxNameLen {
		return nil, fmt.Errorf("%w: object %q has a malformed header (%d key stanzas, name of %d bytes)", ErrTampered, objName, n, nameLen)
	}
	h := headerLen(version, nameLen, n)
	if total > MaxSize || total < uint64(h) {
		return nil, fmt.Errorf("%w: object %q declares an impossible length %d", ErrTampered, objName, total)
	}
	if uint64(len(sealed)) < total {
		return nil, fmt.Errorf("%w: object %q is %d bytes, its header says %d", ErrTruncated, objName, len(sealed), total)
	}
	if uint64(len(sealed)) > total {
		return nil, fmt.Errorf("%w: object %q has %d bytes after its declared end", ErrTampered, objName, uint64(len(sealed))-total)
	}
	nameEnd := fixed + nameLen
	hdr := &header{
		version: version,
		flags:   flags,
		name:    string(sealed[fixed:nameEnd]),
		total:   total,
		salt:    sealed[offSalt : offSalt+saltLen],
		prefix:  sealed[:nameEnd],
		stanzas: sealed[nameEnd : nameEnd+n*stanzaLen],
		macked:  sealed[:h-macLen],
		mac:     sealed[h-macLen : h],
		age:     sealed[h:],
	}
	if version == FormatV2 {
		copy(hdr.storeID[:], sealed[offStoreID:offRecipients])
		copy(hdr.recipients[:], sealed[offRecipients:fixedLenV2])
	}
	return hdr, nil
}

// Header is what [PeekHeader] reads from a sealed object without
// authenticating it.
type Header struct {
	// Version is the format version: [FormatV1] or [FormatV2].
	Version int
	// StoreID is the store the object says it belongs to; zero for
	// [FormatV1] objects and for objects sealed by an unbound envelope.
	StoreID StoreID
	// Name is the name the object says it was sealed for.
	Name string
}

// PeekHeader reads the format version, store id and name of a sealed
// object without any key and WITHOUT AUTHENTICATING THEM: anyone with
// write access to the storage can put any value there. It is for deciding
// how to open an object, never for trusting it: the store layer peeks at
// its own .store object to learn the store id, then opens it with an
// envelope bound to that id, which authenticates the id (an object whose
// store id was altered then fails to open). Errors, naming the object
// (name only labels them): [ErrTooLarge], [ErrNotEnvelope],
// [ErrTruncated], [ErrTampered] (an impossible layout).
func PeekHeader(name string, sealed []byte) (Header, error) {
	hdr, err := parseHeader(name, sealed)
	if err != nil {
		return Header{}, err
	}
	return Header{Version: hdr.version, StoreID: hdr.storeID, Name: hdr.name}, nil
}

// labels returns the HKDF info strings of a format version.
func labels(version int) (wrap, hdrMAC string) {
	if version == FormatV1 {
		return "cairn-state/v1 wrap", "cairn-state/v1 header"
	}
	return "cairn-state/v2 wrap", "cairn-state/v2 header"
}

// stanzaAD is the associated data of one key stanza: the fixed header and
// name, the stanza's key id, and for content-bound objects the SHA-256 of the
// age file.
func stanzaAD(prefix, kid, contentHash []byte) []byte {
	ad := make([]byte, 0, len(prefix)+len(kid)+len(contentHash))
	ad = append(ad, prefix...)
	ad = append(ad, kid...)
	return append(ad, contentHash...)
}

// wrapKey derives the per-object key that wraps the file key for one
// authentication key.
func wrapKey(version int, authKey, salt []byte) []byte {
	info, _ := labels(version)
	k, err := hkdf.Key(sha256.New, authKey, salt, info, chacha20poly1305.KeySize)
	if err != nil {
		panic("envelope: hkdf: " + err.Error()) // only for absurd lengths
	}
	return k
}

// headerMAC authenticates the whole envelope header under the file key.
func headerMAC(version int, fileKey, salt, macked []byte) []byte {
	_, info := labels(version)
	k, err := hkdf.Key(sha256.New, fileKey, salt, info, sha256.Size)
	if err != nil {
		panic("envelope: hkdf: " + err.Error())
	}
	m := hmac.New(sha256.New, k)
	m.Write(macked)
	return m.Sum(nil)
}

var zeroNonce [chacha20poly1305.NonceSize]byte

func wrapFileKey(version int, authKey, salt, ad, fileKey []byte) []byte {
	aead, err := chacha20poly1305.New(wrapKey(version, authKey, salt))
	if err != nil {
		panic("envelope: chacha20poly1305: " + err.Error())
	}
	return aead.Seal(nil, zeroNonce[:], fileKey, ad)
}

func unwrapFileKey(version int, authKey, salt, ad, wrapped []byte) ([]byte, bool) {
	aead, err := chacha20poly1305.New(wrapKey(version, authKey, salt))
	if err != nil {
		panic("envelope: chacha20poly1305: " + err.Error())
	}
	fk, err := aead.Open(nil, zeroNonce[:], wrapped, ad)
	return fk, err == nil
}
