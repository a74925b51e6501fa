package envelope

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/binary"
	"encoding/pem"
	"sync"
	"testing"

	"filippo.io/age"
	"golang.org/x/crypto/chacha20poly1305"
	"golang.org/x/crypto/ssh"
)

func sshEd25519PEM(t testing.TB) []byte {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(k, "test key")
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(block)
}

var (
	rsaOnce sync.Once
	rsaKey  *rsa.PrivateKey
)

func sshRSAPEM(t testing.TB) []byte {
	t.Helper()
	rsaOnce.Do(func() {
		var err error
		rsaKey, err = rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
	})
	block, err := ssh.MarshalPrivateKey(rsaKey, "test key")
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(block)
}

func parseSSH(t testing.TB, pemBytes []byte) *SSHIdentity {
	t.Helper()
	id, err := ParseSSHIdentity(pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// forge builds an object for name, bound to no store, sealed to r by
// someone who holds no identity of the reader: the header, the age file and
// the header MAC are all valid (the forger picks the file key), and the key
// stanzas are whatever the forger supplies (kid||body, 40 bytes each).
func forge(t testing.TB, name string, r age.Recipient, pt []byte, stanzas [][]byte) []byte {
	return forgeAs(t, StoreID{}, name, r, pt, stanzas)
}

// forgeAs is forge for a store id.
func forgeAs(t testing.TB, sid StoreID, name string, r age.Recipient, pt []byte, stanzas [][]byte) []byte {
	t.Helper()
	h := headerLen(len(name), len(stanzas))
	w := &appendWriter{b: make([]byte, h)}
	var fk []byte
	aw, err := age.Encrypt(w, captureRecipient{Recipient: r, fileKey: &fk})
	if err != nil {
		t.Fatal(err)
	}
	aw.Write(pt)
	if err := aw.Close(); err != nil {
		t.Fatal(err)
	}
	out := w.b
	copy(out, magic)
	out[offVersion] = formatVersion
	out[offCount] = byte(len(stanzas))
	binary.BigEndian.PutUint16(out[offNameLen:], uint16(len(name)))
	binary.BigEndian.PutUint64(out[offTotal:], uint64(len(out)))
	rand.Read(out[offSalt : offSalt+saltLen])
	copy(out[offStoreID:], sid[:])
	sealWriterField(out[offWriter:fixedLen], Writer{Instance: "forger"}, fk, out[offSalt:offSalt+saltLen], out[:offWriter])
	copy(out[fixedLen:], name)
	st := out[fixedLen+len(name):]
	for _, s := range stanzas {
		copy(st, s)
		st = st[stanzaLen:]
	}
	copy(out[h-macLen:h], headerMAC(fk, out[offSalt:offSalt+saltLen], out[:h-macLen]))
	return out
}

// rewritePayload replaces the payload of the sealed object with newPT
// (same length, so the declared total length still holds), as someone who
// knows the object's file key could: the age header and the envelope header
// are kept byte for byte.
func rewritePayload(t testing.TB, sealed, fileKey, newPT []byte) []byte {
	t.Helper()
	hdr, err := parseHeader("x", sealed)
	if err != nil {
		t.Fatal(err)
	}
	end := bytes.Index(hdr.age, []byte(ageFooter)) + len(ageFooter) + ageMACB64Len + 1
	if len(newPT) > chunkSize {
		t.Fatal("rewritePayload handles one chunk")
	}
	nonce := make([]byte, streamNonce)
	rand.Read(nonce)
	pk, err := hkdf.Key(sha256.New, fileKey, nonce, payloadLabel, chacha20poly1305.KeySize)
	if err != nil {
		t.Fatal(err)
	}
	aead, err := chacha20poly1305.New(pk)
	if err != nil {
		t.Fatal(err)
	}
	var n [chacha20poly1305.NonceSize]byte
	n[len(n)-1] = 1
	out := bytes.Clone(sealed[:len(sealed)-len(hdr.age)+end])
	out = append(out, nonce...)
	out = aead.Seal(out, n[:], newPT, nil)
	if len(out) != len(sealed) {
		t.Fatalf("rewritten object is %d bytes, want %d", len(out), len(sealed))
	}
	return out
}

// fileKeyOf recovers an object's file key with a recipient's identity, as
// the holder of a recovery key can.
func fileKeyOf(t testing.TB, sealed []byte, id age.Identity) []byte {
	t.Helper()
	hdr, err := parseHeader("x", sealed)
	if err != nil {
		t.Fatal(err)
	}
	ah, err := age.ExtractHeader(bytes.NewReader(hdr.age))
	if err != nil {
		t.Fatal(err)
	}
	fk, err := age.DecryptHeader(ah, id)
	if err != nil {
		t.Fatal(err)
	}
	return fk
}

// agePart strips the envelope header as the recovery recipe in ADR 0064
// does: H = 444 + L + 40n, with n at offset 9 and L at offset 10.
func agePart(sealed []byte) []byte {
	n := int(sealed[9])
	l := int(binary.BigEndian.Uint16(sealed[10:12]))
	return sealed[444+l+40*n:]
}

// authKeyOf is the authentication key of an identity for objects of store
// sid.
func authKeyOf(t testing.TB, id age.Identity, sid StoreID) authKey {
	t.Helper()
	kind, ikm, pass, ok := writerSecret(id)
	if !ok {
		t.Fatalf("%T cannot authenticate", id)
	}
	if pass != nil {
		ikm = pass.storeSecret(sid)
	}
	return deriveAuthKey(kind, ikm)
}

// reseal builds an object around ageFile for the holder of the
// authentication key k, as a writer with a modified sealer could: its key
// stanza (content-bound), store id, recipients digest and header MAC are
// all valid.
func reseal(t testing.TB, name string, sid StoreID, digest [32]byte, k authKey, fileKey, ageFile []byte) []byte {
	return resealFlags(t, name, sid, digest, k, fileKey, ageFile, true)
}

// resealFlags is reseal with the content binding chosen by the caller.
func resealFlags(t testing.TB, name string, sid StoreID, digest [32]byte, k authKey, fileKey, ageFile []byte, bound bool) []byte {
	t.Helper()
	h := headerLen(len(name), 1)
	out := make([]byte, h, h+len(ageFile))
	out = append(out, ageFile...)
	copy(out, magic)
	out[offVersion] = formatVersion
	if bound {
		out[offFlags] = flagContent
	}
	out[offCount] = 1
	binary.BigEndian.PutUint16(out[offNameLen:], uint16(len(name)))
	binary.BigEndian.PutUint64(out[offTotal:], uint64(len(out)))
	salt := out[offSalt : offSalt+saltLen]
	rand.Read(salt)
	copy(out[offStoreID:], sid[:])
	copy(out[offRecipients:], digest[:])
	if bound {
		sum := sha256.Sum256(ageFile)
		copy(out[offContent:], sum[:])
	}
	sealWriterField(out[offWriter:fixedLen], Writer{}, fileKey, salt, out[:offWriter])
	copy(out[fixedLen:], name)
	prefix := out[:fixedLen+len(name)]
	st := out[len(prefix):]
	copy(st, k.kid)
	copy(st[kidLen:], wrapFileKey(k.key, salt, stanzaAD(prefix, k.kid), fileKey))
	copy(out[h-macLen:h], headerMAC(fileKey, salt, out[:h-macLen]))
	return out
}

// newTestPassphrase is a passphrase identity with a low work factor, so
// that tests under the race detector stay fast.
func newTestPassphrase(t testing.TB, pass string, wf int) *PassphraseIdentity {
	t.Helper()
	id, err := newPassphraseIdentity(pass, wf)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
