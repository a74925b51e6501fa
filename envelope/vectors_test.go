package envelope

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"filippo.io/age"
)

// Test vectors in the style of age's testkit: each file in
// testdata/vectors is a header of "key: value" lines, an empty line, then
// the object's bytes. Keys:
//
//	expect:        success | no identity | tampered | unauthenticated |
//	               not envelope | truncated | name mismatch | too large
//	name:          the name to open the object as
//	identity:      an age identity string (repeatable)
//	identity-file: an identity file, relative to testdata (repeatable)
//	passphrase:    a passphrase identity, with work-factor:
//	work-factor:   its scrypt log2 N
//	option:        allow-unauthenticated
//	payload:       hex SHA-256 of the expected plaintext (success only)
//	comment:       free text
//
// go test ./envelope -run TestVectors -update-vectors regenerates them
// (new random bytes; review the diff).
var updateVectors = flag.Bool("update-vectors", false, "regenerate testdata/vectors")

type vector struct {
	expect, name, payload string
	identities            []age.Identity
	opts                  []Option
	object                []byte
}

func parseVector(t *testing.T, path string) vector {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(bytes.NewReader(data))
	var v vector
	var pass string
	wf := 0
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("%s: header not terminated by an empty line", path)
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			break
		}
		key, value, ok := strings.Cut(line, ": ")
		if !ok {
			t.Fatalf("%s: bad header line %q", path, line)
		}
		switch key {
		case "expect":
			v.expect = value
		case "name":
			v.name = value
		case "payload":
			v.payload = value
		case "identity":
			ids, err := ParseIdentities(strings.NewReader(value))
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			v.identities = append(v.identities, ids...)
		case "identity-file":
			ids, err := LoadIdentityFile(filepath.Join("testdata", value))
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			v.identities = append(v.identities, ids...)
		case "passphrase":
			pass = value
		case "work-factor":
			if wf, err = strconv.Atoi(value); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
		case "option":
			if value != "allow-unauthenticated" {
				t.Fatalf("%s: unknown option %q", path, value)
			}
			v.opts = append(v.opts, AllowUnauthenticated(), WithLogger(slog.New(slog.DiscardHandler)))
		case "comment":
		default:
			t.Fatalf("%s: unknown header %q", path, key)
		}
	}
	if pass != "" {
		id, err := NewPassphraseIdentity(pass, wf)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		v.identities = append(v.identities, id)
	}
	v.object, _ = io.ReadAll(br)
	return v
}

var expectErr = map[string]error{
	"no identity":     ErrNoIdentity,
	"tampered":        ErrTampered,
	"unauthenticated": ErrUnauthenticated,
	"not envelope":    ErrNotEnvelope,
	"truncated":       ErrTruncated,
	"name mismatch":   ErrNameMismatch,
	"too large":       ErrTooLarge,
}

func TestVectors(t *testing.T) {
	if *updateVectors {
		generateVectors(t)
	}
	paths, err := filepath.Glob("testdata/vectors/*")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 20 {
		t.Fatalf("only %d vectors in testdata/vectors", len(paths))
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			v := parseVector(t, path)
			e, err := New(v.identities, nil, v.opts...)
			if err != nil {
				t.Fatal(err)
			}
			pt, err := e.Open(v.name, v.object)
			if v.expect == "success" {
				if err != nil {
					t.Fatalf("want success, got %v", err)
				}
				if sum := sha256.Sum256(pt); hex.EncodeToString(sum[:]) != v.payload {
					t.Fatalf("plaintext SHA-256 %x, want %s", sum, v.payload)
				}
				return
			}
			want, ok := expectErr[v.expect]
			if !ok {
				t.Fatalf("unknown expectation %q", v.expect)
			}
			if !errors.Is(err, want) {
				t.Fatalf("want %q (%v), got %v", v.expect, want, err)
			}
			if v.expect == "tampered" && errors.Is(err, ErrUnauthenticated) {
				t.Fatalf("want tampered (a stanza or a MAC failed), got unauthenticated: %v", err)
			}
		})
	}
}

// generateVectors writes testdata/vectors from the keys in testdata/keys.
func generateVectors(t *testing.T) {
	keys := func(file string) *age.X25519Identity {
		ids, err := LoadIdentityFile(filepath.Join("testdata/keys", file))
		if err != nil {
			t.Fatal(err)
		}
		return ids[0].(*age.X25519Identity)
	}
	alice, bob, recovery := keys("alice.txt"), keys("bob.txt"), keys("recovery.txt")
	hybridIDs, err := LoadIdentityFile("testdata/keys/hybrid.txt")
	if err != nil {
		t.Fatal(err)
	}
	hybrid := hybridIDs[0].(*age.HybridIdentity)
	sshIDs, err := LoadIdentityFile("testdata/keys/ssh_ed25519")
	if err != nil {
		t.Fatal(err)
	}
	pass, err := NewPassphraseIdentity("vector passphrase", 10)
	if err != nil {
		t.Fatal(err)
	}

	env := func(ids []age.Identity, rs ...age.Recipient) *Envelope { return mustNew(t, ids, rs) }
	aliceOnly := env([]age.Identity{alice})
	bound := env([]age.Identity{alice}, recovery.Recipient())
	pt := []byte(`{"token":"s3cr3t","counter":7}`)
	const name = "apps/one/state.json"
	base := mustSeal(t, aliceOnly, name, pt)
	boundObj := mustSeal(t, bound, name, pt)

	if err := os.RemoveAll("testdata/vectors"); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll("testdata/vectors", 0o755); err != nil {
		t.Fatal(err)
	}
	type hdr = []string
	write := func(file string, h hdr, payload []byte, object []byte) {
		var b bytes.Buffer
		for _, l := range h {
			b.WriteString(l + "\n")
		}
		if payload != nil {
			sum := sha256.Sum256(payload)
			fmt.Fprintf(&b, "payload: %x\n", sum)
		}
		b.WriteString("\n")
		b.Write(object)
		if err := os.WriteFile(filepath.Join("testdata/vectors", file), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	as := func(id fmt.Stringer) string { return "identity: " + id.String() }
	flip := func(obj []byte, off int) []byte {
		b := bytes.Clone(obj)
		b[off] ^= 0x01
		return b
	}
	nameLen := len(name)
	stanzaOff := fixedLen + nameLen
	macOff := stanzaOff + stanzaLen
	ageOff := macOff + macLen

	write("x25519", hdr{"expect: success", "name: " + name, as(alice), "comment: one X25519 writer"}, pt, base)
	write("x25519_empty", hdr{"expect: success", "name: e", as(alice), "comment: empty plaintext"}, []byte{}, mustSeal(t, aliceOnly, "e", nil))
	big := bytes.Repeat([]byte("0123456789abcdef"), (chunkSize+17)/16)
	write("x25519_two_chunks", hdr{"expect: success", "name: big", as(alice), "comment: plaintext of 64 KiB + 16 bytes: two STREAM chunks"}, big, mustSeal(t, aliceOnly, "big", big))
	write("rotation_second_identity", hdr{"expect: success", "name: " + name, as(bob), "comment: sealed by alice+bob (two key stanzas), opened by bob"}, pt,
		mustSeal(t, env([]age.Identity{alice, bob}), name, pt))
	write("content_bound", hdr{"expect: success", "name: " + name, as(alice), "comment: alice + a recovery recipient: flags bit 0, stanzas bind SHA-256 of the age file"}, pt, boundObj)
	write("hybrid", hdr{"expect: success", "name: pq", as(hybrid), "comment: post-quantum hybrid identity"}, pt, mustSeal(t, env([]age.Identity{hybrid}), "pq", pt))
	write("ssh_ed25519", hdr{"expect: success", "name: ssh", "identity-file: keys/ssh_ed25519", "comment: SSH ed25519 identity"}, pt, mustSeal(t, env(sshIDs), "ssh", pt))
	write("passphrase", hdr{"expect: success", "name: pw", "passphrase: vector passphrase", "work-factor: 10", "comment: scrypt passphrase"}, pt, mustSeal(t, env([]age.Identity{pass}), "pw", pt))
	write("recovery_only", hdr{"expect: unauthenticated", "name: " + name, as(recovery), "comment: the recovery key decrypts but cannot authenticate"}, nil, boundObj)
	write("recovery_only_allowed", hdr{"expect: success", "name: " + name, as(recovery), "option: allow-unauthenticated", "comment: emergency opt-in"}, pt, boundObj)
	write("wrong_identity", hdr{"expect: no identity", "name: " + name, as(bob), "comment: sealed to alice only"}, nil, base)
	write("name_mismatch", hdr{"expect: name mismatch", "name: apps/two/state.json", as(alice), "comment: genuine object opened under another name"}, nil, base)
	write("empty", hdr{"expect: truncated", "name: " + name, as(alice)}, nil, nil)
	write("truncated_header", hdr{"expect: truncated", "name: " + name, as(alice), "comment: cut inside the key stanzas"}, nil, base[:stanzaOff+10])
	write("truncated_payload", hdr{"expect: truncated", "name: " + name, as(alice), "comment: last byte missing"}, nil, base[:len(base)-1])
	write("trailing_byte", hdr{"expect: tampered", "name: " + name, as(alice), "comment: one byte after the declared end"}, nil, append(bytes.Clone(base), 0))
	write("bare_age", hdr{"expect: not envelope", "name: " + name, as(alice), "comment: the age part alone"}, nil, base[ageOff:])
	write("bad_magic", hdr{"expect: not envelope", "name: " + name, as(alice)}, nil, flip(base, 0))
	v2 := bytes.Clone(base)
	v2[offVersion] = 2
	write("version_2", hdr{"expect: not envelope", "name: " + name, as(alice), "comment: unknown format version"}, nil, v2)
	write("unknown_flag", hdr{"expect: not envelope", "name: " + name, as(alice), "comment: flags bit 1"}, nil, func() []byte { b := bytes.Clone(base); b[offFlags] |= 2; return b }())
	write("flag_cleared", hdr{"expect: tampered", "name: " + name, as(alice), "comment: content-bound flag cleared"}, nil, func() []byte { b := bytes.Clone(boundObj); b[offFlags] = 0; return b }())
	write("too_many_stanzas", hdr{"expect: tampered", "name: " + name, as(alice), "comment: n = 17"}, nil, func() []byte { b := bytes.Clone(base); b[offCount] = 17; return b }())
	longer := bytes.Clone(base)
	binary.BigEndian.PutUint64(longer[offTotal:], uint64(len(base)+1))
	write("length_says_longer", hdr{"expect: truncated", "name: " + name, as(alice), "comment: T = actual length + 1"}, nil, longer)
	write("flipped_salt", hdr{"expect: tampered", "name: " + name, as(alice)}, nil, flip(base, offSalt))
	write("flipped_name", hdr{"expect: tampered", "name: " + name, as(alice), "comment: a name byte changed, opened as the original name"}, nil, flip(base, fixedLen))
	write("flipped_key_id", hdr{"expect: unauthenticated", "name: " + name, as(alice), "comment: no stanza for alice any more; age still decrypts"}, nil, flip(base, stanzaOff))
	write("flipped_wrapped_key", hdr{"expect: tampered", "name: " + name, as(alice)}, nil, flip(base, stanzaOff+kidLen))
	write("flipped_header_mac", hdr{"expect: tampered", "name: " + name, as(alice)}, nil, flip(base, macOff))
	write("flipped_age_stanza", hdr{"expect: tampered", "name: " + name, as(alice), "comment: a byte of the age X25519 stanza"}, nil, flip(base, ageOff+len(ageIntro)+5))
	write("flipped_payload", hdr{"expect: tampered", "name: " + name, as(alice)}, nil, flip(base, len(base)-1))
	write("forged_public_recipient", hdr{"expect: unauthenticated", "name: " + name, as(alice), "comment: valid format and age file for alice's recipient, no stanza for alice"}, nil,
		forge(t, name, alice.Recipient(), []byte("forged"), nil))
	write("forged_copied_key_id", hdr{"expect: tampered", "name: " + name, as(alice), "comment: alice's key id with a forged wrapped key"}, nil,
		forge(t, name, alice.Recipient(), []byte("forged"), [][]byte{append(bytes.Clone(base[stanzaOff:stanzaOff+kidLen]), make([]byte, wrappedLen)...)}))
	write("rewritten_by_recovery_holder", hdr{"expect: tampered", "name: " + name, as(alice), "comment: content-bound object whose payload the recovery key holder re-encrypted with the file key"}, nil,
		rewritePayload(t, boundObj, fileKeyOf(t, boundObj, recovery), bytes.Repeat([]byte("X"), len(pt))))
}

// TestDerivation_KnownAnswers pins the key derivations of ADR 0003 with the
// values a second implementation can check step by step (alice's key and
// the x25519 vector).
func TestDerivation_KnownAnswers(t *testing.T) {
	ids, err := LoadIdentityFile("testdata/keys/alice.txt")
	if err != nil {
		t.Fatal(err)
	}
	k, ok := deriveAuthKey(ids[0])
	if !ok {
		t.Fatal("alice's key cannot authenticate")
	}
	check := func(what string, got []byte, want string) {
		t.Helper()
		if hex.EncodeToString(got) != want {
			t.Errorf("%s = %x, want %s", what, got, want)
		}
	}
	check("authentication key", k.key, "7ba0c7be6bee07d93d8296b7053b6544e3c42a84c068b511eb2894ebcc8f7646")
	check("key id", k.kid, "52d20b8717186cf2")

	v := parseVector(t, "testdata/vectors/x25519")
	hdr, err := parseHeader(v.name, v.object)
	if err != nil {
		t.Fatal(err)
	}
	check("salt", hdr.salt, "abd0124574cbd72df204dabe67a3a947")
	check("wrap key", wrapKey(k.key, hdr.salt), "ade7eaa038782f78bec595b564b8b73a789b3b3a96beed645cd73400ea61c2de")
	fk, found, err := (&Envelope{keys: []authKey{k}}).unwrapStanza(v.name, hdr, nil)
	if err != nil || !found {
		t.Fatalf("unwrap: found=%v, %v", found, err)
	}
	check("file key", fk, "0a38188e9023792e7d7b27a918d1bc36")
	if h := len(v.object) - len(hdr.age); h != 127 || hdr.total != 357 {
		t.Errorf("H = %d, T = %d; want 127, 357", h, hdr.total)
	}
}
