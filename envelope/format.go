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

// The envelope format, version 1 (docs/adr/0003-envelope-format.md):
//
//	offset      size  field
//	0           7     magic "CAIRNST"
//	7           1     version, 0x01
//	8           1     flags: bit 0 = content-bound; other bits zero
//	9           1     n, number of key stanzas (0..16)
//	10          2     L, name length, big-endian (1..1024)
//	12          8     T, total length of the sealed object, big-endian
//	20          16    salt, random per object
//	36          L     name, as given to Seal
//	36+L        40×n  key stanzas: key id (8) || wrapped file key (32)
//	36+L+40n    32    header MAC
//	H=68+L+40n  T−H   a complete age-encryption.org/v1 file (binary)
const (
	magic          = "CAIRNST"
	formatVersion  = 1
	flagContent    = 1 << 0
	fixedLen       = 36
	kidLen         = 8
	wrappedLen     = 16 + chacha20poly1305.Overhead
	stanzaLen      = kidLen + wrappedLen
	macLen         = sha256.Size
	saltLen        = 16
	fileKeyLen     = 16
	offVersion     = 7
	offFlags       = 8
	offCount       = 9
	offNameLen     = 10
	offTotal       = 12
	offSalt        = 20
	labelPrefix    = "cairn-state/v1 "
	infoWrap       = labelPrefix + "wrap"
	infoHeader     = labelPrefix + "header"
	infoKeyID      = labelPrefix + "key id"
	authKeySalt    = "cairn-state/v1"
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

// header is a parsed envelope header. Its slices alias the sealed object.
type header struct {
	flags   byte
	name    string
	total   uint64
	salt    []byte
	prefix  []byte // bytes [0, 36+L): the associated data of every stanza
	stanzas []byte // n×stanzaLen bytes
	macked  []byte // bytes [0, H−32): what the header MAC covers
	mac     []byte
	age     []byte // the age file, bytes [H, T)
}

func headerLen(nameLen, n int) int { return fixedLen + nameLen + n*stanzaLen + macLen }

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
	if v := sealed[offVersion]; v != formatVersion {
		return nil, fmt.Errorf("%w: object %q has format version %d; this build reads version %d", ErrNotEnvelope, objName, v, formatVersion)
	}
	if len(sealed) < fixedLen {
		return nil, fmt.Errorf("%w: object %q is %d bytes, shorter than a header", ErrTruncated, objName, len(sealed))
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
	h := headerLen(nameLen, n)
	if total > MaxSize || total < uint64(h) {
		return nil, fmt.Errorf("%w: object %q declares an impossible length %d", ErrTampered, objName, total)
	}
	if uint64(len(sealed)) < total {
		return nil, fmt.Errorf("%w: object %q is %d bytes, its header says %d", ErrTruncated, objName, len(sealed), total)
	}
	if uint64(len(sealed)) > total {
		return nil, fmt.Errorf("%w: object %q has %d bytes after its declared end", ErrTampered, objName, uint64(len(sealed))-total)
	}
	nameEnd := fixedLen + nameLen
	return &header{
		flags:   flags,
		name:    string(sealed[fixedLen:nameEnd]),
		total:   total,
		salt:    sealed[offSalt:fixedLen],
		prefix:  sealed[:nameEnd],
		stanzas: sealed[nameEnd : nameEnd+n*stanzaLen],
		macked:  sealed[:h-macLen],
		mac:     sealed[h-macLen : h],
		age:     sealed[h:],
	}, nil
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
func wrapKey(authKey, salt []byte) []byte {
	k, err := hkdf.Key(sha256.New, authKey, salt, infoWrap, chacha20poly1305.KeySize)
	if err != nil {
		panic("envelope: hkdf: " + err.Error()) // only for absurd lengths
	}
	return k
}

// headerMAC authenticates the whole envelope header under the file key.
func headerMAC(fileKey, salt, macked []byte) []byte {
	k, err := hkdf.Key(sha256.New, fileKey, salt, infoHeader, sha256.Size)
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
