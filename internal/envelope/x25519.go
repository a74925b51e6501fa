package envelope

import (
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"filippo.io/age"
	"golang.org/x/crypto/chacha20poly1305"
)

// x25519Recipient writes the standard age X25519 stanza
// (age-encryption.org/v1, "X25519" recipient type), byte for byte what
// [age.X25519Recipient] writes, with half of its scalar multiplications: age
// computes the ephemeral share and the shared secret through
// golang.org/x/crypto/curve25519, which builds a crypto/ecdh private key for
// each and so runs four Montgomery ladders. Here one [ecdh.Curve.GenerateKey]
// (the ephemeral key and its share) and one [ecdh.PrivateKey.ECDH] (the
// shared secret) run two. All curve arithmetic is crypto/ecdh's, which also
// honours FIPS 140-only mode (ADR 0013). Files it writes open with the stock
// age tool.
type x25519Recipient struct {
	pub *ecdh.PublicKey
	s   string // the age1… string, as age prints it
}

const x25519StanzaLabel = "age-encryption.org/v1/X25519"

// fastRecipient returns the fast equivalent of r when r is an age X25519
// recipient, and r itself otherwise (or if its key cannot be decoded, which
// age's own parser would not have let through).
func fastRecipient(r age.Recipient) age.Recipient {
	xr, ok := r.(*age.X25519Recipient)
	if !ok {
		return r
	}
	s := xr.String()
	raw, err := bech32Decode("age", s)
	if err != nil || len(raw) != 32 {
		return r
	}
	pub, err := ecdh.X25519().NewPublicKey(raw)
	if err != nil {
		return r
	}
	return &x25519Recipient{pub: pub, s: s}
}

// String returns the recipient in age's Bech32 form.
func (r *x25519Recipient) String() string { return r.s }

// Wrap implements [age.Recipient].
func (r *x25519Recipient) Wrap(fileKey []byte) ([]*age.Stanza, error) {
	eph, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("envelope: x25519: %w", err)
	}
	shared, err := eph.ECDH(r.pub) // fails on an all-zero result, as age does
	if err != nil {
		return nil, fmt.Errorf("envelope: x25519: %w", err)
	}
	defer clear(shared)
	share := eph.PublicKey().Bytes()
	salt := make([]byte, 0, 64)
	salt = append(salt, share...)
	salt = append(salt, r.pub.Bytes()...)
	wrapKey, err := hkdf.Key(sha256.New, shared, salt, x25519StanzaLabel, chacha20poly1305.KeySize)
	if err != nil {
		return nil, err
	}
	defer clear(wrapKey)
	aead, err := chacha20poly1305.New(wrapKey)
	if err != nil {
		return nil, err
	}
	body := aead.Seal(nil, make([]byte, chacha20poly1305.NonceSize), fileKey, nil)
	return []*age.Stanza{{
		Type: "X25519",
		Args: []string{base64.RawStdEncoding.EncodeToString(share)},
		Body: body,
	}}, nil
}

const bech32Charset = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"

// bech32Decode decodes a Bech32 string (BIP 173, without its 90-character
// limit, as age uses it) whose human-readable part is hrp, case-insensitively,
// and returns its data converted to bytes.
func bech32Decode(hrp, s string) ([]byte, error) {
	if strings.ToLower(s) != s && strings.ToUpper(s) != s {
		return nil, errors.New("bech32: mixed case")
	}
	s = strings.ToLower(s)
	hrp = strings.ToLower(hrp)
	sep := strings.LastIndexByte(s, '1')
	if sep < 1 || s[:sep] != hrp || len(s)-sep-1 < 6 {
		return nil, fmt.Errorf("bech32: want prefix %q and a checksum", hrp+"1")
	}
	vals := make([]byte, 0, len(s)-sep-1)
	for i := sep + 1; i < len(s); i++ {
		v := strings.IndexByte(bech32Charset, s[i])
		if v < 0 {
			return nil, fmt.Errorf("bech32: invalid character %q", s[i])
		}
		vals = append(vals, byte(v))
	}
	if bech32Polymod(hrp, vals) != 1 {
		return nil, errors.New("bech32: bad checksum")
	}
	vals = vals[:len(vals)-6]
	out := make([]byte, 0, len(vals)*5/8)
	acc, bits := uint(0), uint(0)
	for _, v := range vals {
		acc = acc<<5 | uint(v)
		bits += 5
		if bits >= 8 {
			bits -= 8
			out = append(out, byte(acc>>bits))
		}
	}
	if bits >= 5 || acc&(1<<bits-1) != 0 {
		return nil, errors.New("bech32: bad padding")
	}
	return out, nil
}

func bech32Polymod(hrp string, vals []byte) uint32 {
	gen := [5]uint32{0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3}
	chk := uint32(1)
	step := func(v byte) {
		top := chk >> 25
		chk = (chk&0x1ffffff)<<5 ^ uint32(v)
		for i := range gen {
			if (top>>i)&1 == 1 {
				chk ^= gen[i]
			}
		}
	}
	for i := 0; i < len(hrp); i++ {
		step(hrp[i] >> 5)
	}
	step(0)
	for i := 0; i < len(hrp); i++ {
		step(hrp[i] & 31)
	}
	for _, v := range vals {
		step(v)
	}
	return chk
}
