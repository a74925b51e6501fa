package envelope

import (
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"

	"filippo.io/age"
)

func hex32(t testing.TB, s string) *[32]byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 {
		t.Fatalf("bad test hex %q", s)
	}
	return (*[32]byte)(b)
}

// The vectors of RFC 7748, sections 5.2 and 6.1.
func TestX25519_RFC7748Vectors(t *testing.T) {
	for _, v := range []struct{ k, u, out string }{
		{"a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4", "e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c", "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552"},
		{"4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d", "e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493", "95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957"},
		// Diffie-Hellman: Alice's secret with Bob's public key.
		{"77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a", "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f", "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"},
	} {
		got, err := x25519(hex32(t, v.k), hex32(t, v.u))
		if err != nil || hex.EncodeToString(got[:]) != v.out {
			t.Errorf("X25519(%s…, %s…) = %x, %v; want %s", v.k[:8], v.u[:8], got, err, v.out)
		}
	}
	for _, v := range []struct{ k, pub string }{
		{"77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a", "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"},
		{"5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb", "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"},
	} {
		if got := x25519Base(hex32(t, v.k)); hex.EncodeToString(got[:]) != v.pub {
			t.Errorf("X25519(%s…, 9) = %x, want %s", v.k[:8], got, v.pub)
		}
	}
	// The iterated vector: k = u = 9, then k, u = X25519(k, u), k.
	k, u := [32]byte{9}, [32]byte{9}
	for i := 1; i <= 1000; i++ {
		out, err := x25519(&k, &u)
		if err != nil {
			t.Fatal(err)
		}
		u, k = k, out
		switch i {
		case 1:
			if hex.EncodeToString(k[:]) != "422c8e7a6227d7bca1350b3e2bb7279f7897b87bb6854b783c60e80311ae3079" {
				t.Fatalf("after one iteration: %x", k)
			}
		case 1000:
			if hex.EncodeToString(k[:]) != "684cf59ba83309552800ef566f2f4d3c1c3887c49360e3875f2eb94d99532c51" {
				t.Fatalf("after 1,000 iterations: %x", k)
			}
		}
	}
}

// checkAgainstECDH compares x25519 and x25519Base with crypto/ecdh for one
// scalar and one point (any 32 bytes: off-curve, non-canonical and
// low-order points included).
func checkAgainstECDH(t *testing.T, k, u *[32]byte) {
	t.Helper()
	priv, err := ecdh.X25519().NewPrivateKey(k[:])
	if err != nil {
		t.Fatal(err)
	}
	if got := x25519Base(k); !bytes.Equal(got[:], priv.PublicKey().Bytes()) {
		t.Fatalf("X25519(%x, 9) = %x, crypto/ecdh says %x", k, got, priv.PublicKey().Bytes())
	}
	pub, err := ecdh.X25519().NewPublicKey(u[:])
	if err != nil {
		t.Fatal(err)
	}
	want, wantErr := priv.ECDH(pub)
	got, err := x25519(k, u)
	if (err != nil) != (wantErr != nil) || (err == nil && !bytes.Equal(got[:], want)) {
		t.Fatalf("X25519(%x, %x) = %x, %v; crypto/ecdh says %x, %v", k, u, got, err, want, wantErr)
	}
	if err != nil && !errors.Is(err, errLowOrderPoint) {
		t.Fatalf("X25519(%x, %x): %v, want errLowOrderPoint", k, u, err)
	}
}

func TestX25519_AgreesWithCryptoECDH(t *testing.T) {
	var k, u [32]byte
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
			rand.Read(k[:])
			u = *hex32(t, e)
			u[31] |= top
			checkAgainstECDH(t, &k, &u)
		}
	}
	for range 300 {
		rand.Read(k[:])
		rand.Read(u[:])
		checkAgainstECDH(t, &k, &u) // mostly off-curve (twist) points
		other, err := ecdh.X25519().GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		copy(u[:], other.PublicKey().Bytes())
		checkAgainstECDH(t, &k, &u) // on-curve, as from a real recipient
	}
}

func FuzzX25519(f *testing.F) {
	f.Add(make([]byte, 32), make([]byte, 32))
	f.Add(bytes.Repeat([]byte{0xff}, 32), append([]byte{9}, make([]byte, 31)...))
	f.Fuzz(func(t *testing.T, k, u []byte) {
		if len(k) != 32 || len(u) != 32 {
			return
		}
		checkAgainstECDH(t, (*[32]byte)(k), (*[32]byte)(u))
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
	r := &x25519Recipient{} // u = 0
	if _, err := r.Wrap(make([]byte, 16)); !errors.Is(err, errLowOrderPoint) {
		t.Fatalf("Wrap to u=0 = %v, want errLowOrderPoint", err)
	}
}

func TestFastRecipient_OtherTypesUnchanged(t *testing.T) {
	h, err := age.GenerateHybridIdentity()
	if err != nil {
		t.Fatal(err)
	}
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
	if want := x25519Base((*[32]byte)(secret)); !bytes.Equal(pub, want[:]) {
		t.Fatalf("recipient %x is not the identity's public key %x", pub, want)
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
