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

// The envelope format (docs/adr/0064-writer-sealed-in-the-header.md),
// version 4, the only one Seal writes and Open reads:
//
//	offset      size  field
//	0           7     magic "CAIRNST"
//	7           1     version, 0x04
//	8           1     flags: bit 0 = content-bound; other bits zero
//	9           1     n, number of key stanzas (0..16)
//	10          2     L, name length, big-endian (1..1024)
//	12          8     T, total length of the sealed object, big-endian
//	20          16    salt, random per object
//	36          16    store id (all zero: bound to no store)
//	52          32    recipients digest: SHA-256 of the sorted recipient set
//	84          8     generation of the store's manifest it was sealed under
//	92          8     fencing epoch of the write that made it
//	100         8     the writer's write sequence number in that epoch
//	108         32    C: SHA-256 of the age file when content-bound, else zero
//	140         272   the writer, sealed: a 256-byte block under the file key
//	412         L     name, as given to Seal
//	412+L       40×n  key stanzas: key id (8) || wrapped file key (32)
//	412+L+40n   32    header MAC
//	H=444+L+40n T−H   a complete age-encryption.org/v1 file (binary)
const (
	magic          = "CAIRNST"
	formatVersion  = 4
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
	offStoreID     = 36
	offRecipients  = 52
	offGeneration  = 84
	offEpoch       = 92
	offSequence    = 100
	offContent     = 108
	offWriter      = 140
	fixedLen       = offWriter + writerSealedLen
	authKeySalt    = "cairn-state/v1"
	labelPrefix    = "cairn-state/v1 "
	infoKeyID      = labelPrefix + "key id"
	labelWrap      = "cairn-state/v4 wrap"
	labelHeader    = "cairn-state/v4 header"
	labelWriter    = "cairn-state/v4 writer"
	maxKeyStanzas  = 16
	maxAgeStanzas  = 64
	ageMagicPrefix = "age-encryption.org/"
)

// MaxSize is the largest sealed object, in bytes, that [Envelope.Seal]
// produces and [Envelope.Open] accepts. Open rejects a larger input with
// [ErrTooLarge] before any other work.
const MaxSize = 64 << 20

// MaxNameLen is the longest object name, in bytes, that an envelope binds.
const MaxNameLen = 1024

// Stamp is what an object's authenticated header says about the write
// that made it. The store fills it in: Generation from the manifest the
// store is bound to, Epoch and Sequence from the fence of the writing
// instance (zero for a write through an unfenced store). The envelope
// only carries it; comparing stamps is the store's job.
type Stamp struct {
	// Generation is the generation of the store's manifest the object was
	// sealed under: a manifest that is older than an object's generation
	// was rolled back.
	Generation uint64
	// Epoch is the fencing epoch of the instance that wrote the object.
	Epoch uint64
	// Sequence is the writer's write sequence number within Epoch,
	// strictly increasing across its writes.
	Sequence uint64
}

// header is a parsed envelope header. Its slices alias the sealed object.
type header struct {
	flags      byte
	name       string
	total      uint64
	salt       []byte
	storeID    StoreID
	recipients [32]byte
	stamp      Stamp
	content    []byte // C: the SHA-256 of the age file when bound (else zero)
	writer     []byte // the sealed writer block
	prefix     []byte // bytes [0, fixed+L): the associated data of every stanza
	stanzas    []byte // n×stanzaLen bytes
	macked     []byte // bytes [0, H−32): what the header MAC covers
	mac        []byte
	age        []byte // the age file, bytes [H, T); nil from parsePrefix
	ageOff     int64  // H, where the age file starts
}

// bound reports whether the object's stanzas bind the SHA-256 of its age
// file.
func (h *header) bound() bool { return h.flags&flagContent != 0 }

func headerLen(nameLen, n int) int {
	return fixedLen + nameLen + n*stanzaLen + macLen
}

// zeroContent is C of an object that does not bind its content.
var zeroContent [sha256.Size]byte

// parseHeader checks the layout of sealed (not its authenticity) and
// returns its parts. objName only labels errors.
func parseHeader(objName string, sealed []byte) (*header, error) {
	hdr, err := parsePrefix(objName, sealed, int64(len(sealed)))
	if err != nil {
		return nil, err
	}
	hdr.age = sealed[hdr.ageOff:]
	return hdr, nil
}

// maxHeaderLen is the longest envelope header: what parsePrefix needs of
// an object.
const maxHeaderLen = fixedLen + MaxNameLen + maxKeyStanzas*stanzaLen + macLen

// parsePrefix checks the layout of an object of size bytes whose first
// bytes are b, and returns its header's parts, without the age file
// (header.age is nil). Fewer bytes than its header are ErrTruncated.
// objName only labels errors.
func parsePrefix(objName string, b []byte, size int64) (*header, error) {
	if size > MaxSize {
		return nil, fmt.Errorf("%w: object %q is %d bytes, more than %d", ErrTooLarge, objName, size, MaxSize)
	}
	if size < int64(len(magic)+1) {
		if bytes.HasPrefix([]byte(magic), b) { // includes empty
			return nil, fmt.Errorf("%w: object %q is %d bytes, shorter than a header", ErrTruncated, objName, size)
		}
		return nil, fmt.Errorf("%w: object %q is %d bytes and lacks the %q magic", ErrNotEnvelope, objName, size, magic)
	}
	if string(b[:len(magic)]) != magic {
		hint := ""
		if bytes.HasPrefix(b, []byte(ageMagicPrefix)) {
			hint = " (it is a bare age file)"
		}
		return nil, fmt.Errorf("%w: object %q lacks the %q magic%s", ErrNotEnvelope, objName, magic, hint)
	}
	if version := int(b[offVersion]); version != formatVersion {
		return nil, fmt.Errorf("%w: object %q has format version %d; this build reads version %d only", ErrNotEnvelope, objName, version, formatVersion)
	}
	if size < fixedLen {
		return nil, fmt.Errorf("%w: object %q is %d bytes, shorter than a header", ErrTruncated, objName, size)
	}
	flags := b[offFlags]
	if flags&^flagContent != 0 {
		return nil, fmt.Errorf("%w: object %q uses unknown flags %#02x", ErrNotEnvelope, objName, flags)
	}
	total := binary.BigEndian.Uint64(b[offTotal:])
	n, nameLen, err := keyLayout(objName, b)
	if err != nil {
		return nil, err
	}
	h := headerLen(nameLen, n)
	if total > MaxSize || total < uint64(h) {
		return nil, fmt.Errorf("%w: object %q declares an impossible length %d", ErrTampered, objName, total)
	}
	if uint64(size) < total {
		return nil, fmt.Errorf("%w: object %q is %d bytes, its header says %d", ErrTruncated, objName, size, total)
	}
	if uint64(size) > total {
		return nil, fmt.Errorf("%w: object %q has %d bytes after its declared end", ErrTampered, objName, uint64(size)-total)
	}
	if uint64(len(b)) < uint64(h) {
		return nil, fmt.Errorf("%w: object %q: %d bytes of its %d-byte header given", ErrTruncated, objName, len(b), h)
	}
	content := b[offContent : offContent+sha256.Size]
	if flags&flagContent == 0 && !bytes.Equal(content, zeroContent[:]) {
		return nil, fmt.Errorf("%w: object %q names a content hash but does not bind its content", ErrTampered, objName)
	}
	nameEnd := fixedLen + nameLen
	hdr := &header{
		flags:   flags,
		name:    string(b[fixedLen:nameEnd]),
		total:   total,
		salt:    b[offSalt : offSalt+saltLen],
		prefix:  b[:nameEnd],
		stanzas: b[nameEnd : nameEnd+n*stanzaLen],
		macked:  b[:h-macLen],
		mac:     b[h-macLen : h],
		ageOff:  int64(h),
		content: content,
		writer:  b[offWriter:fixedLen],
		stamp: Stamp{
			Generation: binary.BigEndian.Uint64(b[offGeneration:]),
			Epoch:      binary.BigEndian.Uint64(b[offEpoch:]),
			Sequence:   binary.BigEndian.Uint64(b[offSequence:]),
		},
	}
	copy(hdr.storeID[:], b[offStoreID:offRecipients])
	copy(hdr.recipients[:], b[offRecipients:offGeneration])
	return hdr, nil
}

// keyLayout reads the number of key stanzas and the length of the name
// from the fixed header b (at least fixedLen bytes): [ErrTampered] for a
// layout no object has. objName only labels errors.
func keyLayout(objName string, b []byte) (stanzas, nameLen int, err error) {
	n := int(b[offCount])
	nameLen = int(binary.BigEndian.Uint16(b[offNameLen:]))
	if n > maxKeyStanzas || nameLen == 0 || nameLen > MaxNameLen {
		return 0, 0, fmt.Errorf("%w: object %q has a malformed header (%d key stanzas, name of %d bytes)", ErrTampered, objName, n, nameLen)
	}
	return n, nameLen, nil
}

// Header is what [PeekHeader] reads from a sealed object without
// authenticating it.
type Header struct {
	// StoreID is the store the object says it belongs to; zero for an
	// object sealed by an unbound envelope.
	StoreID StoreID
	// Name is the name the object says it was sealed for.
	Name string
	// Stamp is what the object says about the write that made it.
	Stamp Stamp
	// AgeRecipients is the number of recipient stanzas in the object's
	// age header (0 when it cannot be parsed).
	AgeRecipients int
}

// PeekHeader reads the store id, name and stamp of a sealed object without any key and WITHOUT AUTHENTICATING THEM: anyone with
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
	return Header{StoreID: hdr.storeID, Name: hdr.name, Stamp: hdr.stamp, AgeRecipients: max(countAgeStanzas(hdr.age), 0)}, nil
}

// stanzaAD is the associated data of one key stanza: the fixed header
// (the content hash C and the sealed writer included) and the name, then
// the stanza's key id.
func stanzaAD(prefix, kid []byte) []byte {
	ad := make([]byte, 0, len(prefix)+len(kid))
	ad = append(ad, prefix...)
	return append(ad, kid...)
}

// wrapKey derives the per-object key that wraps the file key for one
// authentication key.
func wrapKey(authKey, salt []byte) []byte {
	k, err := hkdf.Key(sha256.New, authKey, salt, labelWrap, chacha20poly1305.KeySize)
	if err != nil {
		panic("envelope: hkdf: " + err.Error()) // only for absurd lengths
	}
	return k
}

// headerMAC authenticates the whole envelope header under the file key.
func headerMAC(fileKey, salt, macked []byte) []byte {
	k, err := hkdf.Key(sha256.New, fileKey, salt, labelHeader, sha256.Size)
	if err != nil {
		panic("envelope: hkdf: " + err.Error())
	}
	m := hmac.New(sha256.New, k)
	m.Write(macked)
	return m.Sum(nil)
}

var zeroNonce [chacha20poly1305.NonceSize]byte

func wrapFileKey(authKey, salt, ad, fileKey []byte) []byte {
	aead, err := chacha20poly1305.New(wrapKey(authKey, salt))
	if err != nil {
		panic("envelope: chacha20poly1305: " + err.Error())
	}
	return aead.Seal(nil, zeroNonce[:], fileKey, ad)
}

func unwrapFileKey(authKey, salt, ad, wrapped []byte) ([]byte, bool) {
	aead, err := chacha20poly1305.New(wrapKey(authKey, salt))
	if err != nil {
		panic("envelope: chacha20poly1305: " + err.Error())
	}
	fk, err := aead.Open(nil, zeroNonce[:], wrapped, ad)
	return fk, err == nil
}
