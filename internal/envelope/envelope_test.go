package envelope

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"filippo.io/age"
	"filippo.io/age/agessh"
)

func newX25519(t testing.TB) *age.X25519Identity { return generate(t, age.GenerateX25519Identity) }

func newHybrid(t testing.TB) *age.HybridIdentity { return generate(t, age.GenerateHybridIdentity) }

// generate returns a fresh identity from gen; the test fails if gen does.
func generate[I age.Identity](t testing.TB, gen func() (I, error)) I {
	t.Helper()
	id, err := gen()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func mustNew(t testing.TB, ids []age.Identity, rs []age.Recipient, opts Options) *Envelope {
	t.Helper()
	e, err := New(ids, rs, opts)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func mustSeal(t testing.TB, e *Envelope, name string, pt []byte) []byte {
	t.Helper()
	sealed, err := e.Seal(name, pt)
	if err != nil {
		t.Fatalf("Seal(%q): %v", name, err)
	}
	return sealed
}

func TestSealOpen_X25519_RoundTripsEverySize(t *testing.T) {
	e := mustNew(t, []age.Identity{newX25519(t)}, nil, Options{})
	for _, size := range []int{0, 1, 15, 16, 17, 1000, chunkSize - 1, chunkSize, chunkSize + 1, 2 * chunkSize, 3*chunkSize + 7} {
		pt := bytes.Repeat([]byte{byte(size)}, size)
		sealed := mustSeal(t, e, "apps/one/token", pt)
		got, err := e.Open("apps/one/token", sealed)
		if err != nil {
			t.Fatalf("size %d: Open: %v", size, err)
		}
		if !bytes.Equal(got, pt) {
			t.Fatalf("size %d: got %d bytes back, want the %d sealed", size, len(got), len(pt))
		}
	}
}

func TestOpen_ObjectCopiedToAnotherName_FailsWithNameMismatch(t *testing.T) {
	e := mustNew(t, []age.Identity{newX25519(t)}, nil, Options{})
	sealed := mustSeal(t, e, "a", []byte("secret"))
	_, err := e.Open("b", sealed)
	if !errors.Is(err, ErrNameMismatch) {
		t.Fatalf("Open under another name: got %v, want ErrNameMismatch", err)
	}
	if !strings.Contains(err.Error(), `"a"`) || !strings.Contains(err.Error(), `"b"`) {
		t.Fatalf("error %q should name both the requested and the sealed name", err)
	}
}

// isDetected reports whether err is one of the ways Open reports damage.
func isDetected(err error) bool {
	return errors.Is(err, ErrTampered) || errors.Is(err, ErrNotEnvelope) || errors.Is(err, ErrTruncated) || errors.Is(err, ErrForeignStore)
}

func TestSealOpen_EveryIdentityType_RoundTrips(t *testing.T) {
	hybrid := newHybrid(t)
	pass := newTestPassphrase(t, "correct horse battery staple", 10)
	cases := []struct {
		name string
		id   age.Identity
	}{
		{"X25519", newX25519(t)},
		{"hybrid", hybrid},
		{"ssh-ed25519", parseSSH(t, sshEd25519PEM(t))},
		{"ssh-rsa", parseSSH(t, sshRSAPEM(t))},
		{"passphrase", pass},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := mustNew(t, []age.Identity{c.id}, nil, Options{})
			pt := []byte("state of " + c.name)
			sealed := mustSeal(t, e, "obj", pt)
			got, err := e.Open("obj", sealed)
			if err != nil || !bytes.Equal(got, pt) {
				t.Fatalf("Open = %q, %v; want %q", got, err, pt)
			}
			// The age part is an ordinary age file: stock age opens it with
			// the same identity, without this package.
			r, err := age.Decrypt(bytes.NewReader(agePart(sealed)), c.id)
			if err != nil {
				t.Fatalf("stock age: %v", err)
			}
			got, err = io.ReadAll(r)
			if err != nil || !bytes.Equal(got, pt) {
				t.Fatalf("stock age read %q, %v; want %q", got, err, pt)
			}
		})
	}
}

func TestOpen_Rotation_OldOpensNewSealsBothOpen(t *testing.T) {
	oldID, newID := newX25519(t), newX25519(t)
	before := mustNew(t, []age.Identity{oldID}, nil, Options{})
	during := mustNew(t, []age.Identity{newID, oldID}, nil, Options{})
	after := mustNew(t, []age.Identity{newID}, nil, Options{})

	old := mustSeal(t, before, "db", []byte("v1"))
	if got, err := during.Open("db", old); err != nil || string(got) != "v1" {
		t.Fatalf("during rotation, object sealed with the old key: %q, %v", got, err)
	}
	if _, err := after.Open("db", old); !errors.Is(err, ErrNoMatchingIdentity) {
		t.Fatalf("after rotation, an object never re-sealed: got %v, want ErrNoMatchingIdentity", err)
	}

	resealed := mustSeal(t, during, "db", []byte("v2"))
	for name, e := range map[string]*Envelope{"old key only": before, "both keys": during, "new key only": after} {
		if got, err := e.Open("db", resealed); err != nil || string(got) != "v2" {
			t.Errorf("%s opening an object sealed during rotation: %q, %v", name, got, err)
		}
	}
	if _, err := before.Open("db", mustSeal(t, after, "db", []byte("v3"))); !errors.Is(err, ErrNoMatchingIdentity) {
		t.Fatalf("old key opening an object sealed after rotation: got %v, want ErrNoMatchingIdentity", err)
	}
}

func TestOpen_WrongKey_FailsWithNoIdentityAndAgeError(t *testing.T) {
	sealed := mustSeal(t, mustNew(t, []age.Identity{newX25519(t)}, nil, Options{}), "apps/one/db", []byte("x"))
	_, err := mustNew(t, []age.Identity{newX25519(t)}, nil, Options{}).Open("apps/one/db", sealed)
	if !errors.Is(err, ErrNoMatchingIdentity) {
		t.Fatalf("got %v, want ErrNoMatchingIdentity", err)
	}
	var noMatch *age.NoIdentityMatchError
	if !errors.As(err, &noMatch) {
		t.Fatalf("error %v does not wrap *age.NoIdentityMatchError", err)
	}
	if !strings.Contains(err.Error(), `"apps/one/db"`) {
		t.Fatalf("error %q does not name the object", err)
	}
}

// sealedForDamage is an object with two writer identities and a recovery
// recipient (so content-bound), opened by the second identity: every part of
// the format is present.
func sealedForDamage(t *testing.T) (*Envelope, []byte) {
	a, b := newX25519(t), newX25519(t)
	sid := NewStoreID()
	writer := mustNew(t, []age.Identity{a, b}, []age.Recipient{newX25519(t).Recipient()}, Options{StoreID: sid})
	reader := mustNew(t, []age.Identity{b}, nil, Options{StoreID: sid})
	return reader, mustSeal(t, writer, "cfg/app.json", bytes.Repeat([]byte("state "), 30))
}

func TestOpen_EverySingleByteFlip_IsDetected(t *testing.T) {
	for _, bound := range []bool{false, true} {
		var e *Envelope
		var sealed []byte
		if bound {
			e, sealed = sealedForDamage(t)
		} else {
			e = mustNew(t, []age.Identity{newX25519(t)}, nil, Options{})
			sealed = mustSeal(t, e, "cfg/app.json", bytes.Repeat([]byte("state "), 30))
		}
		for i := range sealed {
			for _, mask := range []byte{0x01, 0x80, 0xff} {
				bad := bytes.Clone(sealed)
				bad[i] ^= mask
				_, err := e.Open("cfg/app.json", bad)
				if !isDetected(err) {
					t.Fatalf("content-bound=%v: flipping byte %d of %d with %#02x: got %v, want tampered/not envelope/truncated", bound, i, len(sealed), mask, err)
				}
				if !strings.Contains(err.Error(), `"cfg/app.json"`) {
					t.Fatalf("flipping byte %d: error %q does not name the object", i, err)
				}
			}
		}
	}
}

func TestOpen_EveryTruncation_FailsWithTruncated(t *testing.T) {
	e, sealed := sealedForDamage(t)
	for n := range len(sealed) {
		_, err := e.Open("cfg/app.json", sealed[:n])
		if !errors.Is(err, ErrTruncated) {
			t.Fatalf("first %d of %d bytes: got %v, want ErrTruncated", n, len(sealed), err)
		}
	}
}

func TestOpen_TrailingBytes_FailsWithTampered(t *testing.T) {
	e, sealed := sealedForDamage(t)
	if _, err := e.Open("cfg/app.json", append(sealed, 0)); !errors.Is(err, ErrTampered) {
		t.Fatalf("got %v, want ErrTampered", err)
	}
}

func TestOpen_SwappedBetweenNames_BothFailWithNameMismatch(t *testing.T) {
	e := mustNew(t, []age.Identity{newX25519(t)}, nil, Options{})
	a := mustSeal(t, e, "keys/a", []byte("A"))
	b := mustSeal(t, e, "keys/b", []byte("B"))
	if _, err := e.Open("keys/a", b); !errors.Is(err, ErrNameMismatch) {
		t.Errorf("b's bytes under a: %v", err)
	}
	if _, err := e.Open("keys/b", a); !errors.Is(err, ErrNameMismatch) {
		t.Errorf("a's bytes under b: %v", err)
	}
}

func TestOpen_ForgedWithPublicRecipientOnly_FailsWithTampered(t *testing.T) {
	victim := newX25519(t)
	e := mustNew(t, []age.Identity{victim}, nil, Options{})
	genuine := mustSeal(t, e, "tokens/api", []byte("real"))
	hdr, err := parseHeader("tokens/api", genuine)
	if err != nil {
		t.Fatal(err)
	}
	garbage := make([]byte, stanzaLen)
	rand.Read(garbage)
	copiedKidGarbageBody := append(bytes.Clone(hdr.stanzas[:kidLen]), garbage[kidLen:]...)
	cases := map[string][][]byte{
		"no stanza":                        nil,
		"random stanza":                    {garbage},
		"victim's key id, forged body":     {copiedKidGarbageBody},
		"stanza lifted from a real object": {bytes.Clone(hdr.stanzas)},
	}
	for what, stanzas := range cases {
		t.Run(what, func(t *testing.T) {
			forged := forge(t, "tokens/api", victim.Recipient(), []byte("evil"), stanzas)
			got, err := e.Open("tokens/api", forged)
			if !errors.Is(err, ErrTampered) {
				t.Fatalf("Open(forged) = %q, %v; want ErrTampered", got, err)
			}
		})
	}
	// A forgery with no stanza for us is reported as unauthenticated too.
	_, err = e.Open("tokens/api", forge(t, "tokens/api", victim.Recipient(), []byte("evil"), nil))
	if !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("got %v, want ErrUnauthenticated", err)
	}
}

func TestOpen_RecoveryHolderRewritesPayload_FailsWithTampered(t *testing.T) {
	writer, recovery := newX25519(t), newX25519(t)
	e := mustNew(t, []age.Identity{writer}, []age.Recipient{recovery.Recipient()}, Options{})
	sealed := mustSeal(t, e, "db", []byte("balance=100"))
	// The recovery holder learns the file key and rewrites the payload.
	forged := rewritePayload(t, sealed, fileKeyOf(t, sealed, recovery), []byte("balance=999"))
	if got, err := e.Open("db", forged); !errors.Is(err, ErrTampered) {
		t.Fatalf("Open = %q, %v; want ErrTampered", got, err)
	}
}

// Pins the documented limit (ADR 0004): with no outside recipient, only
// writers learn file keys, and a writer could as well seal anew; the payload
// is then not hashed, and a file-key holder can rewrite it.
func TestOpen_NoOutsideRecipient_FileKeyHolderIsTrustedAsWriter(t *testing.T) {
	writer := newX25519(t)
	e := mustNew(t, []age.Identity{writer}, nil, Options{})
	sealed := mustSeal(t, e, "db", []byte("balance=100"))
	forged := rewritePayload(t, sealed, fileKeyOf(t, sealed, writer), []byte("balance=999"))
	if got, err := e.Open("db", forged); err != nil || string(got) != "balance=999" {
		t.Fatalf("Open = %q, %v; the limit documented in ADR 0004 changed: update the ADR", got, err)
	}
}

func TestOpen_RecoveryOnlyKey_UnauthenticatedUnlessGivenAsRecovery(t *testing.T) {
	writer, recovery := newX25519(t), newX25519(t)
	sealed := mustSeal(t, mustNew(t, []age.Identity{writer}, []age.Recipient{recovery.Recipient()}, Options{}), "db", []byte("data"))

	strict := mustNew(t, []age.Identity{recovery}, nil, Options{})
	if _, err := strict.Open("db", sealed); !errors.Is(err, ErrUnauthenticated) || !errors.Is(err, ErrTampered) {
		t.Fatalf("recovery key as a writer identity: got %v, want ErrUnauthenticated and ErrTampered", err)
	}

	var logs bytes.Buffer
	lenient := mustNew(t, nil, nil, Options{Recovery: []age.Identity{recovery}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	got, info, err := lenient.OpenWithInfo("db", sealed)
	if err != nil || string(got) != "data" {
		t.Fatalf("recovery key given as Options.Recovery: %q, %v", got, err)
	}
	if !info.Unauthenticated {
		t.Fatal("the open did not report that it was unauthenticated")
	}
	if !strings.Contains(logs.String(), "UNAUTHENTICATED") || !strings.Contains(logs.String(), "object=db") {
		t.Fatalf("no warning naming the object was logged: %q", logs.String())
	}
	if strings.Contains(strings.ReplaceAll(logs.String(), "object=db", ""), "data") {
		t.Fatal("plaintext logged")
	}
	// The opt-in does not excuse a name mismatch or damage.
	if _, err := lenient.Open("other", sealed); !errors.Is(err, ErrNameMismatch) {
		t.Fatalf("recovery, other name: got %v, want ErrNameMismatch", err)
	}
	bad := bytes.Clone(sealed)
	bad[len(bad)-1] ^= 1
	if _, err := lenient.Open("db", bad); !errors.Is(err, ErrTampered) {
		t.Fatalf("recovery, damaged payload: got %v, want ErrTampered", err)
	}
	// Stock age, after stripping the header, opens it with the recovery key.
	r, err := age.Decrypt(bytes.NewReader(agePart(sealed)), recovery)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(r); string(got) != "data" {
		t.Fatalf("stock age with the recovery key read %q", got)
	}
}

// Issue #14, finding 2: the recovery opt-in applies to recovery identities
// only. A forgery made with a writer's public recipient is never opened,
// whatever recovery identities are configured beside the writer; an
// authentic object stays authenticated.
func TestOpen_ForgeryToWriterRecipient_NotOpenedThroughRecovery(t *testing.T) {
	writer, recovery := newX25519(t), newX25519(t)
	e := mustNew(t, []age.Identity{writer}, nil, Options{Recovery: []age.Identity{recovery}, Logger: slog.New(slog.DiscardHandler)})
	forged := forge(t, "cfg/admins", writer.Recipient(), []byte("mallory"), nil)
	if got, err := e.Open("cfg/admins", forged); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("forgery to the writer's recipient: Open = %q, %v; want ErrUnauthenticated", got, err)
	}
	_, info, err := e.OpenWithInfo("cfg/admins", mustSeal(t, e, "cfg/admins", []byte("alice")))
	if err != nil || info.Unauthenticated {
		t.Fatalf("authentic object: %+v, %v; want authenticated", info, err)
	}
	// A forgery to the recovery recipient is read, and reported as such.
	_, info, err = e.OpenWithInfo("cfg/admins", forge(t, "cfg/admins", recovery.Recipient(), []byte("mallory"), nil))
	if err != nil || !info.Unauthenticated {
		t.Fatalf("forgery to the recovery recipient: %+v, %v; want opened, unauthenticated", info, err)
	}
	// A writer identity cannot also be a recovery identity.
	if _, err := New([]age.Identity{writer}, nil, Options{Recovery: []age.Identity{writer}}); !errors.Is(err, ErrInvalidIdentity) {
		t.Fatalf("writer given as recovery too: got %v, want ErrInvalidIdentity", err)
	}
	pass := newTestPassphrase(t, "pw", 10)
	if _, err := New([]age.Identity{pass}, nil, Options{Recovery: []age.Identity{newTestPassphrase(t, "pw", 10)}}); !errors.Is(err, ErrInvalidIdentity) {
		t.Fatalf("passphrase given as recovery too: got %v, want ErrInvalidIdentity", err)
	}
}

func TestOpen_NotAnEnvelope_FailsWithNotEnvelope(t *testing.T) {
	id := newX25519(t)
	e := mustNew(t, []age.Identity{id}, nil, Options{})
	var bare bytes.Buffer
	w, _ := age.Encrypt(&bare, id.Recipient())
	w.Write([]byte("x"))
	w.Close()
	v2 := mustSeal(t, e, "n", []byte("x"))
	v2[offVersion] = 2
	v3 := bytes.Clone(v2)
	v3[offVersion] = 3
	v5 := bytes.Clone(v2)
	v5[offVersion] = 5
	cases := map[string][]byte{
		"bare age file": bare.Bytes(),
		"json":          []byte(`{"hello":"world"}`),
		"version 2":     v2,
		"version 3":     v3,
		"version 5":     v5,
	}
	for what, b := range cases {
		if _, err := e.Open("n", b); !errors.Is(err, ErrNotEnvelope) || !strings.Contains(err.Error(), `"n"`) {
			t.Errorf("%s: got %v, want ErrNotEnvelope naming the object", what, err)
		}
	}
}

func TestOpen_LargerThanMaxSize_RefusedBeforeWork(t *testing.T) {
	e := mustNew(t, []age.Identity{newX25519(t)}, nil, Options{})
	if _, err := e.Open("big", make([]byte, MaxSize+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	if _, err := e.Seal("big", make([]byte, MaxSize)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Seal of MaxSize plaintext: got %v, want ErrTooLarge", err)
	}
}

func TestSeal_InvalidName_Refused(t *testing.T) {
	e := mustNew(t, []age.Identity{newX25519(t)}, nil, Options{})
	for _, name := range []string{"", strings.Repeat("n", MaxNameLen+1)} {
		if _, err := e.Seal(name, nil); !errors.Is(err, ErrInvalidName) {
			t.Errorf("Seal(%d-byte name): got %v, want ErrInvalidName", len(name), err)
		}
	}
	if _, err := e.Seal(strings.Repeat("n", MaxNameLen), nil); err != nil {
		t.Errorf("Seal(name of MaxNameLen bytes): %v", err)
	}
}

func TestSeal_SameIdentityTwice_OneStanza(t *testing.T) {
	id := newX25519(t)
	e := mustNew(t, []age.Identity{id, id}, []age.Recipient{id.Recipient()}, Options{})
	sealed := mustSeal(t, e, "x", nil)
	if n := sealed[offCount]; n != 1 {
		t.Fatalf("%d key stanzas, want 1", n)
	}
	if sealed[offFlags]&flagContent != 0 {
		t.Fatal("an identity's own recipient made the object content-bound")
	}
}

func TestNew_RefusesUnusableConfigurations(t *testing.T) {
	pass := newTestPassphrase(t, "pw", 1)
	hybrid := newHybrid(t)
	bareSSH, err := agessh.ParseIdentity(sshEd25519PEM(t))
	if err != nil {
		t.Fatal(err)
	}
	bareSSHRecipient, err := agessh.NewEd25519Recipient(mustSSHPub(t, parseSSH(t, sshEd25519PEM(t))))
	if err != nil {
		t.Fatal(err)
	}
	scrypt, err := ParseRecipient(ScryptRecipientText)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		ids  []age.Identity
		rs   []age.Recipient
		opts Options
		want error
	}{
		{"no identity", nil, nil, Options{}, ErrInvalidIdentity},
		{"nil identity", []age.Identity{nil}, nil, Options{}, ErrInvalidIdentity},
		{"nil recovery identity", []age.Identity{newX25519(t)}, nil, Options{Recovery: []age.Identity{nil}}, ErrInvalidIdentity},
		{"nil recipient", []age.Identity{newX25519(t)}, []age.Recipient{nil}, Options{}, ErrInvalidRecipient},
		{"recipient without text form", []age.Identity{newX25519(t)}, []age.Recipient{bareSSHRecipient}, Options{}, ErrInvalidRecipient},
		{"scrypt stand-in without passphrase", []age.Identity{newX25519(t)}, []age.Recipient{scrypt}, Options{ExactRecipients: true}, ErrInvalidRecipient},
		{"exact set empty", []age.Identity{newX25519(t)}, nil, Options{ExactRecipients: true}, ErrInvalidRecipient},
		{"passphrase with a recipient", []age.Identity{pass}, []age.Recipient{newX25519(t).Recipient()}, Options{}, ErrInvalidIdentity},
		{"passphrase with another identity", []age.Identity{pass, newX25519(t)}, nil, Options{}, ErrInvalidIdentity},
		{"post-quantum with classic", []age.Identity{hybrid, newX25519(t)}, nil, Options{}, ErrInvalidRecipient},
		{"bare agessh identity as a writer", []age.Identity{bareSSH}, nil, Options{}, ErrInvalidIdentity},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := New(c.ids, c.rs, c.opts); !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}

func TestNew_ReaderOnlyIdentityAsRecovery_OpensButCannotSeal(t *testing.T) {
	pemBytes := sshEd25519PEM(t)
	writer := mustNew(t, []age.Identity{newX25519(t)}, []age.Recipient{parseSSH(t, pemBytes).Recipient()}, Options{})
	sealed := mustSeal(t, writer, "x", []byte("hi"))
	bareSSH, err := agessh.ParseIdentity(pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	reader := mustNew(t, nil, nil, Options{Recovery: []age.Identity{bareSSH}, Logger: slog.New(slog.DiscardHandler)})
	if got, info, err := reader.OpenWithInfo("x", sealed); err != nil || string(got) != "hi" || !info.Unauthenticated {
		t.Fatalf("OpenWithInfo = %q, %+v, %v", got, info, err)
	}
	if _, err := reader.Seal("x", nil); !errors.Is(err, ErrInvalidIdentity) {
		t.Fatalf("Seal without a writer identity: got %v, want ErrInvalidIdentity", err)
	}
	// Sealing to the writer and the SSH key: two parties learn the file
	// key, so the content is bound.
	if sealed[offFlags]&flagContent == 0 {
		t.Fatal("sealing to an outside recipient did not bind the content")
	}
}

func TestEnvelope_ConcurrentSealOpen(t *testing.T) {
	e := mustNew(t, []age.Identity{newX25519(t)}, nil, Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			name := fmt.Sprintf("obj/%d", i)
			for range 5 {
				sealed, err := e.Seal(name, []byte(name))
				if err != nil {
					errs <- err
					return
				}
				if got, err := e.Open(name, sealed); err != nil || string(got) != name {
					errs <- fmt.Errorf("%s: %q, %v", name, got, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestOpen_HostileAgeHeaderWithManyStanzas_RefusedCheaply(t *testing.T) {
	id := newX25519(t)
	e := mustNew(t, []age.Identity{id}, nil, Options{})
	rs := make([]age.Recipient, 100)
	for i := range rs {
		rs[i] = newX25519(t).Recipient()
	}
	forged := forge(t, "x", multiRecipient(rs), []byte("x"), nil)
	if _, err := e.Open("x", forged); !errors.Is(err, ErrTampered) || !strings.Contains(err.Error(), "stanzas") {
		t.Fatalf("got %v, want ErrTampered about too many stanzas", err)
	}
}

// multiRecipient wraps to several recipients as one.
type multiRecipient []age.Recipient

func (m multiRecipient) Wrap(fk []byte) ([]*age.Stanza, error) {
	var all []*age.Stanza
	for _, r := range m {
		s, err := r.Wrap(fk)
		if err != nil {
			return nil, err
		}
		all = append(all, s...)
	}
	return all, nil
}
