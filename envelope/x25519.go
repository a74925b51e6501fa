package envelope

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"filippo.io/age"
	"filippo.io/edwards25519"
	"filippo.io/edwards25519/field"
	"golang.org/x/crypto/chacha20poly1305"
)

// x25519Recipient writes the standard age X25519 stanza
// (age-encryption.org/v1, "X25519" recipient type), byte for byte what
// [age.X25519Recipient] writes, at a quarter of the cost: age computes the
// ephemeral share and the shared secret through golang.org/x/crypto/curve25519,
// which on current Go runs four Montgomery ladders (crypto/ecdh derives a
// public key eagerly for each of the two private keys it builds). Here the
// ephemeral share is one fixed-base multiplication with precomputed tables
// (filippo.io/edwards25519, mapped to the Montgomery u-coordinate) and the
// shared secret one ladder (RFC 7748). Seal spends almost all of its time
// there (ADR 0012). Files it writes open with the stock age tool.
type x25519Recipient struct {
	pub [32]byte
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
	pub, err := bech32Decode("age", s)
	if err != nil || len(pub) != 32 {
		return r
	}
	fr := &x25519Recipient{s: s}
	copy(fr.pub[:], pub)
	return fr
}

// String returns the recipient in age's Bech32 form.
func (r *x25519Recipient) String() string { return r.s }

// Wrap implements [age.Recipient].
func (r *x25519Recipient) Wrap(fileKey []byte) ([]*age.Stanza, error) {
	var eph [32]byte
	rand.Read(eph[:])
	defer clear(eph[:])
	share := x25519Base(&eph)
	shared, err := x25519(&eph, &r.pub)
	if err != nil {
		return nil, err
	}
	defer clear(shared[:])
	salt := make([]byte, 0, 64)
	salt = append(salt, share[:]...)
	salt = append(salt, r.pub[:]...)
	wrapKey, err := hkdf.Key(sha256.New, shared[:], salt, x25519StanzaLabel, chacha20poly1305.KeySize)
	if err != nil {
		return nil, err
	}
	aead, err := chacha20poly1305.New(wrapKey)
	if err != nil {
		return nil, err
	}
	body := aead.Seal(nil, make([]byte, chacha20poly1305.NonceSize), fileKey, nil)
	return []*age.Stanza{{
		Type: "X25519",
		Args: []string{base64.RawStdEncoding.EncodeToString(share[:])},
		Body: body,
	}}, nil
}

// clampScalar applies the X25519 scalar clamping of RFC 7748.
func clampScalar(k *[32]byte) {
	k[0] &= 248
	k[31] &= 127
	k[31] |= 64
}

// x25519Base returns X25519(k, 9): the clamped scalar times the Ed25519 base
// point, whose Montgomery u-coordinate is the X25519 public key. The base
// point has prime order ℓ, so reducing the clamped scalar mod ℓ (which
// SetBytesWithClamping does) does not change the point.
func x25519Base(k *[32]byte) [32]byte {
	s, err := edwards25519.NewScalar().SetBytesWithClamping(k[:])
	if err != nil {
		panic("envelope: x25519: " + err.Error()) // only for len(k) != 32
	}
	var out [32]byte
	copy(out[:], new(edwards25519.Point).ScalarBaseMult(s).BytesMontgomery())
	return out
}

var errLowOrderPoint = errors.New("envelope: x25519: low-order recipient point (all-zero shared secret)")

// x25519 returns X25519(k, u) with the Montgomery ladder of RFC 7748,
// section 5, in constant time, and fails on an all-zero result as age does.
func x25519(k, u *[32]byte) ([32]byte, error) {
	var out [32]byte
	e := *k
	clampScalar(&e)
	defer clear(e[:])

	var x1, x2, z2, x3, z3, a, aa, b, bb, c, d, da, cb, ee field.Element
	if _, err := x1.SetBytes(u[:]); err != nil { // ignores the top bit, as the RFC requires
		return out, fmt.Errorf("envelope: x25519: %w", err)
	}
	x2.One()
	z2.Zero()
	x3.Set(&x1)
	z3.One()
	swap := 0
	for t := 254; t >= 0; t-- {
		bit := int(e[t/8]>>(t%8)) & 1
		swap ^= bit
		x2.Swap(&x3, swap)
		z2.Swap(&z3, swap)
		swap = bit

		a.Add(&x2, &z2)
		aa.Square(&a)
		b.Subtract(&x2, &z2)
		bb.Square(&b)
		ee.Subtract(&aa, &bb)
		c.Add(&x3, &z3)
		d.Subtract(&x3, &z3)
		da.Multiply(&d, &a)
		cb.Multiply(&c, &b)
		x3.Add(&da, &cb)
		x3.Square(&x3)
		z3.Subtract(&da, &cb)
		z3.Square(&z3)
		z3.Multiply(&z3, &x1)
		x2.Multiply(&aa, &bb)
		z2.Mult32(&ee, 121665)
		z2.Add(&z2, &aa)
		z2.Multiply(&z2, &ee)
	}
	x2.Swap(&x3, swap)
	z2.Swap(&z3, swap)
	z2.Invert(&z2)
	x2.Multiply(&x2, &z2)
	copy(out[:], x2.Bytes())
	var zero [32]byte
	if subtle.ConstantTimeCompare(out[:], zero[:]) == 1 {
		return out, errLowOrderPoint
	}
	return out, nil
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
