package envelope

import (
	"bufio"
	"bytes"
	"crypto/hkdf"
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
	"slices"
	"strconv"
	"strings"
	"testing"

	"filippo.io/age"
)

// Test vectors in the style of age's testkit: each file in
// testdata/vectors is a header of "key: value" lines, an empty line, then
// the object's bytes. Keys:
//
//	expect:            success | no identity | tampered | unauthenticated |
//	                   not envelope | truncated | name mismatch | too large |
//	                   foreign store
//	name:              the name to open the object as
//	identity:          a writer identity, as an age identity string (repeatable)
//	identity-file:     a writer identity file, relative to testdata (repeatable)
//	recovery-identity: a recovery identity string (Options.Recovery; repeatable)
//	passphrase:        a passphrase writer identity, with work-factor:
//	work-factor:       its scrypt log2 N
//	store-id:          the envelope's store id (Options.StoreID); absent: unbound
//	recipient:         a recipient of the envelope's sealing set (repeatable)
//	option:            exact-recipients
//	payload:           hex SHA-256 of the expected plaintext (success only)
//	stamp:             generation epoch sequence, as Open reports them (success only)
//	writer:            instance hostname pid, as Open reports them (success only;
//	                   "-" for an empty name)
//	authenticated:     yes | no: whether a writer identity authenticated it
//	same-recipients:   yes | no: whether it was sealed to the envelope's set
//	comment:           free text
//
// go test ./internal/envelope -run TestVectors -update-vectors
// regenerates the files (new random bytes; review the diff).
var updateVectors = flag.Bool("update-vectors", false, "regenerate testdata/vectors/v4_*")

type vector struct {
	expect, name, payload         string
	stamp, writer                 string
	authenticated, sameRecipients string
	identities, recovery          []age.Identity
	recipients                    []age.Recipient
	opts                          Options
	object                        []byte
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
		case "stamp":
			v.stamp = value
		case "writer":
			v.writer = value
		case "authenticated":
			v.authenticated = value
		case "same-recipients":
			v.sameRecipients = value
		case "identity", "recovery-identity":
			ids, err := ParseIdentities(strings.NewReader(value))
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if key == "identity" {
				v.identities = append(v.identities, ids...)
			} else {
				v.recovery = append(v.recovery, ids...)
			}
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
		case "store-id":
			if v.opts.StoreID, err = ParseStoreID(value); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
		case "recipient":
			r, err := ParseRecipient(value)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			v.recipients = append(v.recipients, r)
		case "option":
			if value != "exact-recipients" {
				t.Fatalf("%s: unknown option %q", path, value)
			}
			v.opts.ExactRecipients = true
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
	v.opts.Recovery = v.recovery
	v.opts.Logger = slog.New(slog.DiscardHandler)
	v.object, _ = io.ReadAll(br)
	return v
}

var expectErr = map[string]error{
	"no identity":     ErrNoMatchingIdentity,
	"tampered":        ErrTampered,
	"unauthenticated": ErrUnauthenticated,
	"not envelope":    ErrNotEnvelope,
	"truncated":       ErrTruncated,
	"name mismatch":   ErrNameMismatch,
	"too large":       ErrTooLarge,
	"foreign store":   ErrForeignStore,
}

// writerText is a writer as a vector's writer: line gives it.
func writerText(w Writer) string {
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	return fmt.Sprintf("%s %s %d", dash(w.Instance), dash(w.Hostname), w.PID)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func TestVectors(t *testing.T) {
	if *updateVectors {
		generateVectors(t)
	}
	paths, err := filepath.Glob("testdata/vectors/*")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 50 {
		t.Fatalf("only %d vectors in testdata/vectors", len(paths))
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			v := parseVector(t, path)
			e, err := New(v.identities, v.recipients, v.opts)
			if err != nil {
				t.Fatal(err)
			}
			pt, info, err := e.OpenWithInfo(v.name, v.object)
			if v.expect == "success" {
				if err != nil {
					t.Fatalf("want success, got %v", err)
				}
				if sum := sha256.Sum256(pt); hex.EncodeToString(sum[:]) != v.payload {
					t.Fatalf("plaintext SHA-256 %x, want %s", sum, v.payload)
				}
				if st := info.Stamp; v.stamp != "" && fmt.Sprintf("%d %d %d", st.Generation, st.Epoch, st.Sequence) != v.stamp {
					t.Errorf("stamp %+v, want %s", st, v.stamp)
				}
				if w := info.Writer; v.writer != "" && writerText(w) != v.writer {
					t.Errorf("writer %+v, want %s", w, v.writer)
				}
				// The header alone says what Open says.
				if hinfo, err := e.OpenHeader(v.name, v.object, int64(len(v.object))); err != nil || hinfo != info {
					t.Errorf("OpenHeader = %+v, %v; Open said %+v", hinfo, err, info)
				}
				if v.authenticated != "" && yesNo(!info.Unauthenticated) != v.authenticated {
					t.Errorf("authenticated: %s, want %s", yesNo(!info.Unauthenticated), v.authenticated)
				}
				if v.sameRecipients != "" && yesNo(info.SameRecipients) != v.sameRecipients {
					t.Errorf("same recipients: %s, want %s", yesNo(info.SameRecipients), v.sameRecipients)
				}
				// The recovery promise: stock age, after the header is
				// stripped, reads the same plaintext with the same keys.
				var out bytes.Buffer
				if err := Recover(v.name, v.object, &out, append(slices.Clone(v.identities), v.recovery...)...); err != nil {
					t.Fatalf("Recover: %v", err)
				}
				if !bytes.Equal(out.Bytes(), pt) {
					t.Fatal("Recover read another plaintext than Open")
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
			if !strings.Contains(err.Error(), fmt.Sprintf("%q", v.name)) {
				t.Errorf("error %q does not name the object", err)
			}
		})
	}
}

// The store ids of the vectors.
var (
	vectorStoreA = mustStoreID("c41a5e8f0b7d4e2a9f3c6b1d8e0a7f52")
	vectorStoreB = mustStoreID("7b3f9d2c1e8a4f6b0d5c9e3a2f1b8d47")
)

func mustStoreID(s string) StoreID {
	id, err := ParseStoreID(s)
	if err != nil {
		panic(err)
	}
	return id
}

// generateVectors writes testdata/vectors/v4_* from the keys in
// testdata/keys.
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
	pass, err := NewPassphraseIdentity("vector passphrase", MinWorkFactor)
	if err != nil {
		t.Fatal(err)
	}

	storeA := Options{StoreID: vectorStoreA}
	env := func(ids []age.Identity, o Options, rs ...age.Recipient) *Envelope { return mustNew(t, ids, rs, o) }
	aliceOnly := env([]age.Identity{alice}, storeA)
	bound := env([]age.Identity{alice}, storeA, recovery.Recipient())
	pt := []byte(`{"token":"s3cr3t","counter":7}`)
	const name = "apps/one/state.json"
	stamp := Stamp{Generation: 2, Epoch: 7, Sequence: 41}
	writer := Writer{Instance: "pod-a", Hostname: "node-1", PID: 4242}
	base, err := aliceOnly.SealStamped(name, pt, stamp, writer)
	if err != nil {
		t.Fatal(err)
	}
	boundObj, err := bound.SealStamped(name, pt, stamp, writer)
	if err != nil {
		t.Fatal(err)
	}
	twoWriters := mustSeal(t, env([]age.Identity{alice, bob}, storeA), name, pt)
	unbound := mustSeal(t, env([]age.Identity{alice}, Options{}), name, pt)

	old, err := filepath.Glob("testdata/vectors/v*_*")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range old {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
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
		if err := os.WriteFile(filepath.Join("testdata/vectors", "v4_"+file), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	as := func(id fmt.Stringer) string { return "identity: " + id.String() }
	inA := "store-id: " + vectorStoreA.String()
	inB := "store-id: " + vectorStoreB.String()
	flip := func(obj []byte, off int) []byte {
		b := bytes.Clone(obj)
		b[off] ^= 0x01
		return b
	}
	stanzaOff := fixedLen + len(name)
	macOff := stanzaOff + stanzaLen
	ageOff := macOff + macLen
	ok := []string{"expect: success"}
	succ := func(h ...string) hdr { return append(slices.Clone(ok), h...) }

	// Success, per identity type and shape.
	write("x25519", succ("name: "+name, inA, as(alice), "authenticated: yes", "same-recipients: yes", "stamp: 2 7 41", "writer: pod-a node-1 4242", "comment: one X25519 writer, store A, sealed under manifest generation 2 by the write 41 of epoch 7 of instance pod-a (host node-1, pid 4242)"), pt, base)
	write("unstamped", succ("name: "+name, inA, as(alice), "stamp: 0 0 0", "writer: - - 0", "comment: sealed with a zero stamp and no writer (an unfenced write of a store without a manifest)"), pt, mustSeal(t, aliceOnly, name, pt))
	write("x25519_empty", succ("name: e", inA, as(alice), "comment: empty plaintext"), []byte{}, mustSeal(t, aliceOnly, "e", nil))
	big := bytes.Repeat([]byte("0123456789abcdef"), (chunkSize+17)/16)
	write("x25519_two_chunks", succ("name: big", inA, as(alice), "comment: plaintext of 64 KiB + 16 bytes: two STREAM chunks"), big, mustSeal(t, aliceOnly, "big", big))
	write("hybrid", succ("name: pq", inA, as(hybrid), "comment: post-quantum hybrid identity"), pt, mustSeal(t, env([]age.Identity{hybrid}, storeA), "pq", pt))
	write("ssh_ed25519", succ("name: ssh", inA, "identity-file: keys/ssh_ed25519", "comment: SSH ed25519 identity"), pt, mustSeal(t, env(sshIDs, storeA), "ssh", pt))
	write("passphrase", succ("name: pw", inA, "passphrase: vector passphrase", fmt.Sprintf("work-factor: %d", MinWorkFactor), "comment: scrypt passphrase; the authentication key is salted with the store id"), pt, mustSeal(t, env([]age.Identity{pass}, storeA), "pw", pt))
	write("two_writers_opened_by_one", succ("name: "+name, inA, as(bob), "comment: sealed by alice+bob: two key stanzas, so content-bound; opened by bob alone"), pt, twoWriters)
	write("content_bound", succ("name: "+name, inA, as(alice), "same-recipients: no", "stamp: 2 7 41", "writer: pod-a node-1 4242", "comment: alice + a recovery recipient, content-bound (its header carries the age file's SHA-256); this envelope seals to alice alone"), pt, boundObj)
	write("same_recipients_exact", succ("name: "+name, inA, as(alice), "option: exact-recipients", "recipient: "+alice.Recipient().String(), "recipient: "+recovery.Recipient().String(), "same-recipients: yes", "comment: opened by an envelope whose exact set is the object's"), pt, boundObj)
	write("recovery_identity", succ("name: "+name, inA, "recovery-identity: "+recovery.String(), "authenticated: no", "writer: pod-a node-1 4242", "comment: the recovery key given as a recovery identity reads it, and its writer, unauthenticated"), pt, boundObj)
	write("recovery_as_writer", hdr{"expect: unauthenticated", "name: " + name, inA, as(recovery), "comment: the recovery key as a writer identity: it decrypts but authenticates nothing"}, nil, boundObj)
	write("wrong_identity", hdr{"expect: no identity", "name: " + name, inA, as(bob), "comment: sealed to alice only"}, nil, base)

	// Store binding.
	write("foreign_store", hdr{"expect: foreign store", "name: " + name, inB, as(alice), "comment: an object of store A opened in store B"}, nil, base)
	write("foreign_store_wrong_key", hdr{"expect: foreign store", "name: " + name, inB, as(bob), "comment: an object of store A opened in store B with a key it was not sealed to: still foreign store"}, nil, base)
	write("bound_object_unbound_envelope", hdr{"expect: foreign store", "name: " + name, as(alice), "comment: an object of store A opened by an unbound envelope"}, nil, base)
	write("unbound_object", succ("name: "+name, as(alice), "comment: sealed and opened by unbound envelopes"), pt, unbound)
	write("unbound_object_in_store", hdr{"expect: foreign store", "name: " + name, inA, as(alice), "comment: an object sealed by an unbound envelope, in store A: it belongs to no store"}, nil, unbound)
	storeFlipped := flip(base, offStoreID)
	flippedID, _ := PeekHeader(name, storeFlipped)
	write("tampered_store_id", hdr{"expect: tampered", "name: " + name, "store-id: " + flippedID.StoreID.String(), as(alice), "comment: store A's object with its store id changed, opened in the store it now names"}, nil, storeFlipped)
	write("tampered_store_id_seen_as_foreign", hdr{"expect: foreign store", "name: " + name, inA, as(alice), "comment: the same, opened in store A"}, nil, storeFlipped)
	write("tampered_recipients_digest", hdr{"expect: tampered", "name: " + name, inA, as(alice), "comment: a byte of the recipients digest changed"}, nil, flip(base, offRecipients))
	write("tampered_generation", hdr{"expect: tampered", "name: " + name, inA, as(alice), "comment: the stamp's manifest generation changed (2 to 3)"}, nil, flip(base, offGeneration+7))
	write("tampered_epoch", hdr{"expect: tampered", "name: " + name, inA, as(alice), "comment: the stamp's epoch changed"}, nil, flip(base, offEpoch+7))
	write("tampered_sequence", hdr{"expect: tampered", "name: " + name, inA, as(alice), "comment: the stamp's write sequence changed"}, nil, flip(base, offSequence+7))
	write("tampered_writer", hdr{"expect: tampered", "name: " + name, inA, as(alice), "comment: a byte of the sealed writer changed"}, nil, flip(base, offWriter+3))
	write("tampered_writer_tag", hdr{"expect: tampered", "name: " + name, inA, as(alice), "comment: a byte of the sealed writer's tag changed"}, nil, flip(base, fixedLen-1))
	write("tampered_writer_bound", hdr{"expect: tampered", "name: " + name, inA, as(alice), "comment: a byte of the sealed writer of a content-bound object changed"}, nil, flip(boundObj, offWriter+100))
	write("tampered_writer_recovery", hdr{"expect: tampered", "name: " + name, inA, "recovery-identity: " + recovery.String(), "comment: the same, opened by the recovery identity: the header MAC covers the writer"}, nil, flip(boundObj, offWriter+100))
	write("tampered_content_hash", hdr{"expect: tampered", "name: " + name, inA, as(alice), "comment: a byte of the content hash C of a content-bound object changed"}, nil, flip(boundObj, offContent+5))
	write("content_hash_unbound", hdr{"expect: tampered", "name: " + name, inA, as(alice), "comment: a content hash on an object that does not bind its content"}, nil, flip(base, offContent+31))

	// Name binding, truncation, layout.
	write("name_mismatch", hdr{"expect: name mismatch", "name: apps/two/state.json", inA, as(alice), "comment: genuine object copied to another name"}, nil, base)
	write("empty", hdr{"expect: truncated", "name: " + name, inA, as(alice)}, nil, nil)
	write("truncated_fixed_header", hdr{"expect: truncated", "name: " + name, inA, as(alice), "comment: cut inside the stamp"}, nil, base[:offEpoch+4])
	write("truncated_stanzas", hdr{"expect: truncated", "name: " + name, inA, as(alice), "comment: cut inside the key stanzas"}, nil, base[:stanzaOff+10])
	write("truncated_payload", hdr{"expect: truncated", "name: " + name, inA, as(alice), "comment: last byte missing"}, nil, base[:len(base)-1])
	longer := bytes.Clone(base)
	binary.BigEndian.PutUint64(longer[offTotal:], uint64(len(base)+1))
	write("length_says_longer", hdr{"expect: truncated", "name: " + name, inA, as(alice), "comment: T = actual length + 1"}, nil, longer)
	write("trailing_byte", hdr{"expect: tampered", "name: " + name, inA, as(alice), "comment: one byte after the declared end"}, nil, append(bytes.Clone(base), 0))
	write("bare_age", hdr{"expect: not envelope", "name: " + name, inA, as(alice), "comment: the age part alone"}, nil, base[ageOff:])
	write("bad_magic", hdr{"expect: not envelope", "name: " + name, inA, as(alice)}, nil, flip(base, 0))
	write("unknown_flag", hdr{"expect: not envelope", "name: " + name, inA, as(alice), "comment: flags bit 1"}, nil, func() []byte { b := bytes.Clone(base); b[offFlags] |= 2; return b }())
	write("too_many_stanzas", hdr{"expect: tampered", "name: " + name, inA, as(alice), "comment: n = 17"}, nil, func() []byte { b := bytes.Clone(base); b[offCount] = 17; return b }())
	for _, v := range []byte{1, 2, 3, 5} {
		write(fmt.Sprintf("version_%d", v), hdr{"expect: not envelope", "name: " + name, inA, as(alice), fmt.Sprintf("comment: the version byte set to %d: this build reads version 4 only", v)}, nil,
			func() []byte { b := bytes.Clone(base); b[offVersion] = v; return b }())
	}

	// Damage and forgeries.
	write("flag_cleared", hdr{"expect: tampered", "name: " + name, inA, as(alice), "comment: content-bound flag cleared"}, nil, func() []byte { b := bytes.Clone(boundObj); b[offFlags] = 0; return b }())
	write("flag_set", hdr{"expect: tampered", "name: " + name, inA, as(alice), "comment: content-bound flag set on an object that did not bind its content"}, nil, func() []byte { b := bytes.Clone(base); b[offFlags] = flagContent; return b }())
	write("flipped_salt", hdr{"expect: tampered", "name: " + name, inA, as(alice)}, nil, flip(base, offSalt))
	write("flipped_name", hdr{"expect: tampered", "name: " + name, inA, as(alice), "comment: a name byte changed, opened as the original name"}, nil, flip(base, fixedLen))
	write("flipped_key_id", hdr{"expect: unauthenticated", "name: " + name, inA, as(alice), "comment: no stanza for alice any more; age still decrypts"}, nil, flip(base, stanzaOff))
	write("flipped_wrapped_key", hdr{"expect: tampered", "name: " + name, inA, as(alice)}, nil, flip(base, stanzaOff+kidLen))
	write("flipped_header_mac", hdr{"expect: tampered", "name: " + name, inA, as(alice)}, nil, flip(base, macOff))
	write("flipped_age_stanza", hdr{"expect: tampered", "name: " + name, inA, as(alice), "comment: a byte of the age X25519 stanza"}, nil, flip(base, ageOff+len(ageIntro)+5))
	write("flipped_payload", hdr{"expect: tampered", "name: " + name, inA, as(alice)}, nil, flip(base, len(base)-1))
	write("forged_public_recipient", hdr{"expect: unauthenticated", "name: " + name, inA, as(alice), "comment: valid format and age file for alice's recipient, no stanza for alice"}, nil,
		forgeAs(t, vectorStoreA, name, alice.Recipient(), []byte("forged"), nil))
	write("forged_public_recipient_with_recovery", hdr{"expect: unauthenticated", "name: " + name, inA, as(alice), "recovery-identity: " + recovery.String(), "comment: the same forgery, with a recovery identity configured: a writer's key never opens an unauthenticated object"}, nil,
		forgeAs(t, vectorStoreA, name, alice.Recipient(), []byte("forged"), nil))
	write("forged_copied_key_id", hdr{"expect: tampered", "name: " + name, inA, as(alice), "comment: alice's key id with a forged wrapped key"}, nil,
		forgeAs(t, vectorStoreA, name, alice.Recipient(), []byte("forged"), [][]byte{append(bytes.Clone(base[stanzaOff:stanzaOff+kidLen]), make([]byte, wrappedLen)...)}))
	write("rewritten_by_recovery_holder", hdr{"expect: tampered", "name: " + name, inA, as(alice), "comment: content-bound object whose payload the recovery key holder re-encrypted with the file key"}, nil,
		rewritePayload(t, boundObj, fileKeyOf(t, boundObj, recovery), bytes.Repeat([]byte("X"), len(pt))))
	write("rewritten_by_other_writer", hdr{"expect: tampered", "name: " + name, inA, as(bob), "comment: sealed by alice+bob; alice re-encrypted the payload; bob alone opens it (issue #14, finding 1)"}, nil,
		rewritePayload(t, twoWriters, fileKeyOf(t, twoWriters, alice), bytes.Repeat([]byte("X"), len(pt))))

	// Crafted by a writer (alice): what our Seal never writes.
	aliceKey := authKeyOf(t, alice, vectorStoreA)
	hdrBase, err := parseHeader(name, base)
	if err != nil {
		t.Fatal(err)
	}
	boundHdr, err := parseHeader(name, boundObj)
	if err != nil {
		t.Fatal(err)
	}
	write("unbound_with_two_age_stanzas", hdr{"expect: tampered", "name: " + name, inA, as(alice), "comment: not content-bound although its age file has two recipient stanzas (alice's and the recovery key's), whose holders both learn the file key"}, nil,
		resealFlags(t, name, vectorStoreA, boundHdr.recipients, aliceKey, fileKeyOf(t, boundObj, alice), boundHdr.age, false))
	fk := fileKeyOf(t, base, alice)
	write("age_header_stock_age_rejects", hdr{"expect: tampered", "name: " + name, inA, as(alice), "comment: an extra age stanza whose body line is not base64: stock age refuses the header, so Open does too"}, nil,
		reseal(t, name, vectorStoreA, hdrBase.recipients, aliceKey, fk, insertAgeStanza(t, hdrBase.age, fk, "-> junk\n!!!!\n")))
}

// TestDerivation_KnownAnswers pins the key derivations of ADR 0030 with the
// values a second implementation can check step by step (alice's key, the
// v4_x25519 vector, and the passphrase's per-store key).
func TestDerivation_KnownAnswers(t *testing.T) {
	alice := loadKey(t, "alice.txt")
	k := authKeyOf(t, alice, StoreID{})
	check := func(what string, got []byte, want string) {
		t.Helper()
		if hex.EncodeToString(got) != want {
			t.Errorf("%s = %x, want %s", what, got, want)
		}
	}
	check("authentication key", k.key, "7ba0c7be6bee07d93d8296b7053b6544e3c42a84c068b511eb2894ebcc8f7646")
	check("key id", k.kid, "52d20b8717186cf2")

	v := parseVector(t, "testdata/vectors/v4_x25519")
	hdr, err := parseHeader(v.name, v.object)
	if err != nil {
		t.Fatal(err)
	}
	check("salt", hdr.salt, knownSalt)
	check("wrap key", wrapKey(k.key, hdr.salt), knownWrapKey)
	fk, found, err := unwrapStanza(v.name, hdr, []authKey{k})
	if err != nil || !found {
		t.Fatalf("unwrap: found=%v, %v", found, err)
	}
	check("file key", fk, knownFileKey)
	wk, err := hkdf.Key(sha256.New, fk, hdr.salt, labelWriter, 32)
	if err != nil {
		t.Fatal(err)
	}
	check("writer key", wk, knownWriterKey)
	w, err := openWriterField(v.name, hdr, fk)
	if err != nil || w != (Writer{Instance: "pod-a", Hostname: "node-1", PID: 4242}) {
		t.Errorf("writer = %+v, %v", w, err)
	}
	check("recipients digest", hdr.recipients[:], "d0bba3392538432d6d2549700dff83d753db6d4360b0b5ab069e92a99dd0789b")
	if d := recipientsDigest([]string{alice.Recipient().String()}); !bytes.Equal(d[:], hdr.recipients[:]) {
		t.Errorf("recipients digest of {alice} = %x, the vector carries %x", d, hdr.recipients)
	}
	if hdr.storeID != vectorStoreA || hdr.stamp != (Stamp{Generation: 2, Epoch: 7, Sequence: 41}) {
		t.Errorf("store id %s, stamp %+v", hdr.storeID, hdr.stamp)
	}
	if h := len(v.object) - len(hdr.age); h != knownH || int(hdr.total) != knownT {
		t.Errorf("H = %d, T = %d; want %d, %d", h, hdr.total, knownH, knownT)
	}

	// A passphrase's authentication key is salted with the store id.
	pass := newTestPassphrase(t, "vector passphrase", 10)
	check("passphrase key, store A", authKeyOf(t, pass, vectorStoreA).kid, "67b6db2b635ede1e")
	check("passphrase key, store B", authKeyOf(t, pass, vectorStoreB).kid, "cc4e05d160787c77")
}

// The known answers of the v4_x25519 vector (ADR 0064's table).
const (
	knownSalt      = "c9447d09a11d32cfc0116c3aff8ef7ab"
	knownWrapKey   = "24dbac1558ac2df5737d48aa434d95e9b8268890067d4a2559207780f66e4ae5"
	knownFileKey   = "977e80c193b798b555f26dedd7e649b6"
	knownWriterKey = "83e1ded757336c853cc7ce4e9f01fea993160c74ef3acb71d77856ed4bc720cb"
	knownH         = 503
	knownT         = 733
)
