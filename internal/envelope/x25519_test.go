package envelope

import (
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"filippo.io/age"
)

// bech32Encode is the encoder matching bech32Decode (BIP 173, no length
// limit), for building age keys from raw bytes in tests.
func bech32Encode(hrp string, data []byte) string {
	var vals []byte
	acc, bits := uint(0), uint(0)
	for _, b := range data {
		acc = acc<<8 | uint(b)
		bits += 8
		for bits >= 5 {
			bits -= 5
			vals = append(vals, byte(acc>>bits)&31)
		}
	}
	if bits > 0 {
		vals = append(vals, byte(acc<<(5-bits))&31)
	}
	lower := strings.ToLower(hrp)
	chk := bech32Polymod(lower, append(slices.Clone(vals), 0, 0, 0, 0, 0, 0)) ^ 1
	for i := range 6 {
		vals = append(vals, byte(chk>>(5*(5-i)))&31)
	}
	var sb strings.Builder
	sb.WriteString(lower + "1")
	for _, v := range vals {
		sb.WriteByte(bech32Charset[v])
	}
	if hrp != lower {
		return strings.ToUpper(sb.String())
	}
	return sb.String()
}

// checkStanzaAgainstAge seals a file key to the recipient whose X25519
// secret is secret, and to the point u (any 32 bytes), with the fast
// recipient and with age's own: the recipient decodes to the public key
// crypto/ecdh computes, age's identity unwraps our stanza, and for u both
// recipients succeed or both refuse (the low-order points).
func checkStanzaAgainstAge(t *testing.T, secret, u []byte) {
	t.Helper()
	id, err := age.ParseX25519Identity(bech32Encode("AGE-SECRET-KEY-", secret))
	if err != nil {
		t.Fatal(err)
	}
	priv, err := ecdh.X25519().NewPrivateKey(secret)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := fastRecipient(id.Recipient()).(*x25519Recipient)
	if !ok {
		t.Fatalf("fastRecipient(%s) is not the fast recipient", id.Recipient())
	}
	if !bytes.Equal(r.pub.Bytes(), priv.PublicKey().Bytes()) {
		t.Fatalf("recipient %s decodes to %x, crypto/ecdh says the public key is %x", r, r.pub.Bytes(), priv.PublicKey().Bytes())
	}
	fileKey := make([]byte, 16)
	rand.Read(fileKey)
	st, err := r.Wrap(fileKey)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := id.Unwrap(st); err != nil || !bytes.Equal(got, fileKey) {
		t.Fatalf("age unwraps our stanza to %x, %v; want %x", got, err, fileKey)
	}

	stockU, err := age.ParseX25519Recipient(bech32Encode("age", u))
	if err != nil {
		t.Fatal(err)
	}
	fastU := fastRecipient(stockU)
	if _, ok := fastU.(*x25519Recipient); !ok {
		t.Fatalf("fastRecipient(%x) is not the fast recipient", u)
	}
	_, errStock := stockU.Wrap(fileKey)
	_, errFast := fastU.Wrap(fileKey)
	if (errStock == nil) != (errFast == nil) {
		t.Fatalf("wrapping to %x: age says %v, we say %v", u, errStock, errFast)
	}
}

func TestX25519Recipient_AgreesWithAge(t *testing.T) {
	secret, u := make([]byte, 32), make([]byte, 32)
	// Low-order and edge points: 0, 1, p-1, p, p+1, 2^255-1, and two of
	// order 8; each twice, with the top bit set (which must be ignored).
	edges := []string{
		"0000000000000000000000000000000000000000000000000000000000000000",
		"0100000000000000000000000000000000000000000000000000000000000000",
		"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800",
		"5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157",
	}
	for _, e := range edges {
		for _, top := range []byte{0, 0x80} {
			rand.Read(secret)
			b, err := hex.DecodeString(e)
			if err != nil {
				t.Fatal(err)
			}
			b[31] |= top
			checkStanzaAgainstAge(t, secret, b)
		}
	}
	for range 100 {
		rand.Read(secret)
		rand.Read(u)
		checkStanzaAgainstAge(t, secret, u) // mostly off-curve (twist) points
	}
}

func FuzzX25519Stanza(f *testing.F) {
	f.Add(make([]byte, 32), make([]byte, 32))
	f.Add(bytes.Repeat([]byte{0xff}, 32), append([]byte{9}, make([]byte, 31)...))
	f.Fuzz(func(t *testing.T, secret, u []byte) {
		if len(secret) != 32 || len(u) != 32 {
			return
		}
		checkStanzaAgainstAge(t, secret, u)
	})
}

// The fast recipient is what New seals with, and its files open with the
// stock age package; its stanza has the shape age's own has.
func TestX25519Recipient_InteropWithAge(t *testing.T) {
	for range 20 {
		id, err := age.GenerateX25519Identity()
		if err != nil {
			t.Fatal(err)
		}
		r, ok := fastRecipient(id.Recipient()).(*x25519Recipient)
		if !ok {
			t.Fatalf("fastRecipient(%T) is not the fast recipient", id.Recipient())
		}
		if r.String() != id.Recipient().String() {
			t.Fatalf("String() = %q, want %q", r, id.Recipient())
		}
		fileKey := make([]byte, 16)
		rand.Read(fileKey)
		ours, err := r.Wrap(fileKey)
		if err != nil {
			t.Fatal(err)
		}
		stock, err := id.Recipient().Wrap(fileKey)
		if err != nil {
			t.Fatal(err)
		}
		if len(ours) != 1 || ours[0].Type != stock[0].Type || len(ours[0].Args) != 1 || len(ours[0].Args[0]) != len(stock[0].Args[0]) || len(ours[0].Body) != len(stock[0].Body) {
			t.Fatalf("stanza %+v, age writes %+v", ours[0], stock[0])
		}
		if got, err := id.Unwrap(ours); err != nil || !bytes.Equal(got, fileKey) {
			t.Fatalf("age's identity unwraps our stanza to %x, %v; want %x", got, err, fileKey)
		}
		var buf bytes.Buffer
		w, err := age.Encrypt(&buf, r)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, "state")
		w.Close()
		rd, err := age.Decrypt(&buf, id)
		if err != nil {
			t.Fatalf("age.Decrypt of a file sealed to the fast recipient: %v", err)
		}
		if pt, _ := io.ReadAll(rd); string(pt) != "state" {
			t.Fatalf("decrypted %q", pt)
		}
		// Wrong identity: age refuses, as with its own stanzas.
		other, _ := age.GenerateX25519Identity()
		if _, err := other.Unwrap(ours); !errors.Is(err, age.ErrIncorrectIdentity) {
			t.Fatalf("another identity unwraps our stanza: %v", err)
		}
	}
}

func TestX25519Recipient_LowOrderPointRefused(t *testing.T) {
	stock, err := age.ParseX25519Recipient(bech32Encode("age", make([]byte, 32))) // u = 0
	if err != nil {
		t.Fatal(err)
	}
	r, ok := fastRecipient(stock).(*x25519Recipient)
	if !ok {
		t.Fatal("u = 0 did not get the fast recipient")
	}
	if _, err := r.Wrap(make([]byte, 16)); err == nil || !strings.Contains(err.Error(), "x25519") {
		t.Fatalf("Wrap to u=0 = %v, want an x25519 error (an all-zero shared secret)", err)
	}
}

func TestFastRecipient_OtherTypesUnchanged(t *testing.T) {
	h := newHybrid(t)
	r := h.Recipient()
	if got := fastRecipient(r); got != age.Recipient(r) {
		t.Fatalf("hybrid recipient replaced by %T", got)
	}
}

func TestBech32Decode(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	secret, err := bech32Decode("AGE-SECRET-KEY-", id.String())
	if err != nil || len(secret) != 32 {
		t.Fatalf("decoding the identity: %d bytes, %v", len(secret), err)
	}
	pub, err := bech32Decode("age", id.Recipient().String())
	if err != nil || len(pub) != 32 {
		t.Fatalf("decoding the recipient: %d bytes, %v", len(pub), err)
	}
	priv, err := ecdh.X25519().NewPrivateKey(secret)
	if err != nil {
		t.Fatal(err)
	}
	if want := priv.PublicKey().Bytes(); !bytes.Equal(pub, want) {
		t.Fatalf("recipient %x is not the identity's public key %x", pub, want)
	}
	if got := bech32Encode("age", pub); got != id.Recipient().String() {
		t.Fatalf("bech32Encode(recipient) = %s, want %s", got, id.Recipient())
	}
	s := id.Recipient().String()
	flip := func(c byte) byte {
		i := strings.IndexByte(bech32Charset, c)
		return bech32Charset[(i+1)%len(bech32Charset)]
	}
	for name, bad := range map[string]string{
		"one character changed":  s[:10] + string(flip(s[10])) + s[11:],
		"last character changed": s[:len(s)-1] + string(flip(s[len(s)-1])),
		"mixed case":             strings.ToUpper(s[:5]) + s[5:],
		"other prefix":           "agf" + s[3:],
		"no separator":           "age",
		"invalid character":      s[:10] + "b" + s[11:],
		"too short":              "age1qqqqq",
		"empty":                  "",
	} {
		if _, err := bech32Decode("age", bad); err == nil {
			t.Errorf("%s: %q decoded", name, bad)
		}
	}
}

func FuzzBech32Decode(f *testing.F) {
	id, _ := age.GenerateX25519Identity()
	f.Add(id.Recipient().String())
	f.Add(id.String())
	f.Add("age1")
	f.Fuzz(func(t *testing.T, s string) {
		b, err := bech32Decode("age", s)
		if err == nil && len(b) > len(s) {
			t.Fatalf("%d bytes from %d characters", len(b), len(s))
		}
	})
}
