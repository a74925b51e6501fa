package envelope

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"filippo.io/age"
	"golang.org/x/crypto/ssh"
)

func TestParseIdentities_AgeKeygenFileWithCommentsAndSeveralKeys(t *testing.T) {
	a, b := newX25519(t), newX25519(t)
	file := "# created: 2026-11-30T04:00:00Z\n# public key: " + a.Recipient().String() + "\n" + a.String() +
		"\n\n# the previous key, kept for rotation\n" + b.String() + "\n"
	ids, err := ParseIdentities(strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 {
		t.Fatalf("parsed %d identities, want 2", len(ids))
	}
	for i, want := range []*age.X25519Identity{a, b} {
		r, err := RecipientOf(ids[i])
		if err != nil {
			t.Fatal(err)
		}
		if r.(*age.X25519Recipient).String() != want.Recipient().String() {
			t.Errorf("identity %d has recipient %v, want %v", i, r, want.Recipient())
		}
	}
	// The parsed identities seal and open like the originals.
	sealed := mustSeal(t, mustNew(t, []age.Identity{a}, nil, Options{}), "x", []byte("hi"))
	if got, err := mustNew(t, ids, nil, Options{}).Open("x", sealed); err != nil || string(got) != "hi" {
		t.Fatalf("Open with parsed identities = %q, %v", got, err)
	}
}

func TestParseIdentities_SSHPrivateKeys(t *testing.T) {
	for name, pemBytes := range map[string][]byte{"ed25519": sshEd25519PEM(t), "rsa": sshRSAPEM(t)} {
		t.Run(name, func(t *testing.T) {
			ids, err := ParseIdentities(bytes.NewReader(pemBytes))
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := ids[0].(*SSHIdentity); len(ids) != 1 || !ok {
				t.Fatalf("got %d identities of type %T, want one *SSHIdentity", len(ids), ids[0])
			}
			e := mustNew(t, ids, nil, Options{})
			if got, err := e.Open("k", mustSeal(t, e, "k", []byte("v"))); err != nil || string(got) != "v" {
				t.Fatalf("round trip = %q, %v", got, err)
			}
		})
	}
}

func TestParseIdentities_NeitherAgeNorSSH_ClearErrorWithoutContent(t *testing.T) {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	encrypted, err := os.ReadFile("testdata/keys/ssh_ed25519_encrypted")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		file, wantMsg string
	}{
		"empty":                 {"", "no identities"},
		"junk":                  {"hunter2-TOPSECRET\n", "expected age-keygen output"},
		"age public key":        {newX25519(t).Recipient().String() + "\n", "public key"},
		"ssh public key":        {string(ssh.MarshalAuthorizedKey(sshPub)), "public key"},
		"encrypted ssh key":     {string(encrypted), "passphrase-protected"},
		"corrupt ssh key":       {"-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n", "SSH private key"},
		"truncated secret line": {"AGE-SECRET-KEY-1QQQ\n", "expected age-keygen output"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseIdentities(strings.NewReader(c.file))
			if !errors.Is(err, ErrInvalidIdentity) {
				t.Fatalf("got %v, want ErrInvalidIdentity", err)
			}
			if !strings.Contains(err.Error(), c.wantMsg) {
				t.Errorf("error %q does not say %q", err, c.wantMsg)
			}
			if strings.Contains(err.Error(), "TOPSECRET") || strings.Contains(err.Error(), "QQQ") {
				t.Errorf("error %q quotes the file's content", err)
			}
		})
	}
}

func TestLoadIdentityFile_NamesThePath(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "identity.txt")
	id := newX25519(t)
	if err := os.WriteFile(good, []byte(id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ids, err := LoadIdentityFile(good)
	if err != nil || len(ids) != 1 {
		t.Fatalf("LoadIdentityFile = %d identities, %v", len(ids), err)
	}
	bad := filepath.Join(dir, "bad.txt")
	if err := os.WriteFile(bad, []byte("nope\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{bad, filepath.Join(dir, "missing.txt")} {
		_, err := LoadIdentityFile(p)
		if !errors.Is(err, ErrInvalidIdentity) || !strings.Contains(err.Error(), p) {
			t.Errorf("LoadIdentityFile(%s): got %v, want ErrInvalidIdentity naming the path", p, err)
		}
	}
}

func TestParseRecipient(t *testing.T) {
	x := newX25519(t)
	hybrid := newHybrid(t)
	ed := parseSSH(t, sshEd25519PEM(t))
	rsa := parseSSH(t, sshRSAPEM(t))
	edLine := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(mustSSHPub(t, ed))))
	rsaLine := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(mustSSHPub(t, rsa))))
	otherHybrid := newHybrid(t)
	valid := []struct {
		name, s        string
		writer, opener age.Identity
	}{
		{"X25519", x.Recipient().String(), newX25519(t), x},
		{"X25519 with spaces", "  " + x.Recipient().String() + "\n", newX25519(t), x},
		{"hybrid", hybrid.Recipient().String(), otherHybrid, hybrid},
		{"ssh-ed25519", edLine + " user@host", newX25519(t), ed},
		{"ssh-rsa", rsaLine, newX25519(t), rsa},
	}
	for _, c := range valid {
		t.Run(c.name, func(t *testing.T) {
			r, err := ParseRecipient(c.s)
			if err != nil {
				t.Fatal(err)
			}
			// Objects sealed to it open, as age files, with its identity.
			sealed := mustSeal(t, mustNew(t, []age.Identity{c.writer}, []age.Recipient{r}, Options{}), "x", []byte("v"))
			if _, err := age.Decrypt(bytes.NewReader(agePart(sealed)), c.opener); err != nil {
				t.Fatalf("the matching identity cannot decrypt: %v", err)
			}
		})
	}
	// Another last character, so the checksum no longer holds: "q" unless
	// the recipient already ends in it (one in 32 keys).
	xr, last := x.Recipient().String(), "q"
	if strings.HasSuffix(xr, last) {
		last = "p"
	}
	invalid := map[string]string{
		"empty":          "",
		"garbage":        "hello",
		"bad checksum":   xr[:len(xr)-1] + last,
		"a secret key":   x.String(),
		"unknown ssh":    "ssh-dss AAAA",
		"truncated age1": "age1qqq",
	}
	for name, s := range invalid {
		t.Run("invalid/"+name, func(t *testing.T) {
			_, err := ParseRecipient(s)
			if !errors.Is(err, ErrInvalidRecipient) {
				t.Fatalf("got %v, want ErrInvalidRecipient", err)
			}
			if strings.Contains(err.Error(), "AGE-SECRET-KEY") {
				t.Fatalf("error %q echoes a secret key", err)
			}
		})
	}
}

func mustRecipientString(t testing.TB, r age.Recipient) string {
	t.Helper()
	s, err := RecipientString(r)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustSSHPub(t testing.TB, id *SSHIdentity) ssh.PublicKey {
	t.Helper()
	pk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(mustRecipientString(t, id.Recipient())))
	if err != nil {
		t.Fatalf("the recipient of an SSH identity does not print as an authorized key: %v", err)
	}
	return pk
}

func TestRecipientOf_X25519_IsWhatAgeKeygenPrints(t *testing.T) {
	id := newX25519(t)
	r, err := RecipientOf(id)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.(interface{ String() string }).String(); got != id.Recipient().String() || !strings.HasPrefix(got, "age1") {
		t.Fatalf("RecipientOf = %s, want %s", got, id.Recipient())
	}
}

func TestNewPassphraseIdentity_WorkFactorIsPartOfTheKey(t *testing.T) {
	p10 := newTestPassphrase(t, "pw", 10)
	p11 := newTestPassphrase(t, "pw", 11)
	sealed := mustSeal(t, mustNew(t, []age.Identity{p10}, nil, Options{}), "x", []byte("v"))
	// age accepts lower work factors; authentication is what differs.
	_, err := mustNew(t, []age.Identity{p11}, nil, Options{}).Open("x", sealed)
	if !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("other work factor: got %v, want ErrUnauthenticated", err)
	}
	wrong := newTestPassphrase(t, "not pw", 10)
	if _, err := mustNew(t, []age.Identity{wrong}, nil, Options{}).Open("x", sealed); !errors.Is(err, ErrNoMatchingIdentity) && !errors.Is(err, ErrTampered) {
		t.Fatalf("wrong passphrase: got %v", err)
	}
	if _, err := NewPassphraseIdentity("pw", 23); !errors.Is(err, ErrInvalidIdentity) {
		t.Fatalf("work factor 23: got %v, want ErrInvalidIdentity", err)
	}
	if _, err := NewPassphraseIdentity("", MinWorkFactor); !errors.Is(err, ErrInvalidIdentity) {
		t.Fatalf("empty passphrase: got %v, want ErrInvalidIdentity", err)
	}
}

// Issue #14, finding 4: a work factor of 1 made the passphrase key id a
// cheap guessing oracle.
func TestNewPassphraseIdentity_BelowMinimumWorkFactor_Refused(t *testing.T) {
	for _, wf := range []int{1, 10, MinWorkFactor - 1} {
		if _, err := NewPassphraseIdentity("a long passphrase", wf); !errors.Is(err, ErrInvalidIdentity) || !strings.Contains(err.Error(), strconv.Itoa(wf)) {
			t.Errorf("work factor %d: got %v, want ErrInvalidIdentity naming it", wf, err)
		}
	}
	p, err := NewPassphraseIdentity("a long passphrase", 0)
	if err != nil || p.WorkFactor() != DefaultWorkFactor {
		t.Fatalf("work factor 0: %v, %v; want the default %d", p, err, DefaultWorkFactor)
	}
}

// Issue #14, finding 4: one fixed scrypt salt let one dictionary serve
// every deployment. The key id of a passphrase differs per store, and
// the derivation is paid once per store, not per Open.
func TestPassphrase_AuthenticationKeySaltedPerStore_DerivedOnce(t *testing.T) {
	pass := newTestPassphrase(t, "correct horse battery staple", 10)
	a, b := NewStoreID(), NewStoreID()
	kA, kB := authKeyOf(t, pass, a), authKeyOf(t, pass, b)
	if bytes.Equal(kA.kid, kB.kid) || bytes.Equal(kA.key, kB.key) {
		t.Fatal("the same passphrase has the same key in two stores")
	}
	envA := mustNew(t, []age.Identity{pass}, nil, Options{StoreID: a})
	sealed := mustSeal(t, envA, "x", []byte("v"))
	if hdr, err := parseHeader("x", sealed); err != nil || !bytes.Equal(hdr.stanzas[:kidLen], kA.kid) {
		t.Fatalf("the object's key id is not store A's: %v", err)
	}
	// Every derivation so far, by the address of its cached bytes: a
	// derivation paid again would be stored anew.
	cached := func() map[string]*byte {
		pass.mu.Lock()
		defer pass.mu.Unlock()
		m := map[string]*byte{}
		for k, v := range pass.keys {
			m[k] = &v[0]
		}
		return m
	}
	before := cached()
	for range 3 {
		if _, err := envA.Open("x", sealed); err != nil {
			t.Fatal(err)
		}
		mustNew(t, []age.Identity{pass}, nil, Options{StoreID: a})
	}
	if after := cached(); !maps.Equal(before, after) {
		t.Fatalf("opening and building envelopes for the same store derived keys again: %d cached before, %d after", len(before), len(after))
	}
}
