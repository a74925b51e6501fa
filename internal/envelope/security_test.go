package envelope

import (
	"bytes"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"filippo.io/age"
)

// Issue #14, finding 1: an object sealed by old+new identities with no
// outside recipient whose payload the old key's holder rewrote must not be
// accepted by a reader that holds only the new key: the content is bound
// whenever two keys learn the file key.
func TestOpen_RetiredKeyRewritesPayload_Refused(t *testing.T) {
	oldID, newID := newX25519(t), newX25519(t)
	sealed := mustSeal(t, mustNew(t, []age.Identity{newID, oldID}, nil, Options{}), "db", []byte("balance=100"))
	forged := rewritePayload(t, sealed, fileKeyOf(t, sealed, oldID), []byte("balance=999"))
	got, err := mustNew(t, []age.Identity{newID}, nil, Options{}).Open("db", forged)
	if !errors.Is(err, ErrTampered) {
		t.Fatalf("reader with the new key only: Open = %q, %v; want ErrTampered", got, err)
	}
}

func loadKey(t testing.TB, file string) *age.X25519Identity {
	t.Helper()
	ids, err := LoadIdentityFile("testdata/keys/" + file)
	if err != nil {
		t.Fatal(err)
	}
	return ids[0].(*age.X25519Identity)
}

// Issue #14, finding 4: zero-value identities have an empty secret; an
// envelope built from one would authenticate with a key anyone can derive.
func TestNew_ZeroValueIdentities_Refused(t *testing.T) {
	for name, id := range map[string]age.Identity{
		"PassphraseIdentity{}": &PassphraseIdentity{},
		"SSHIdentity{}":        &SSHIdentity{},
		"X25519Identity{}":     &age.X25519Identity{},
		"HybridIdentity{}":     &age.HybridIdentity{},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := New([]age.Identity{id}, nil, Options{}); !errors.Is(err, ErrInvalidIdentity) {
				t.Fatalf("New(%s) = %v, want ErrInvalidIdentity", name, err)
			}
			writer := newX25519(t)
			if _, err := New([]age.Identity{writer}, nil, Options{Recovery: []age.Identity{id}}); !errors.Is(err, ErrInvalidIdentity) {
				t.Fatalf("New with recovery identity %s = %v, want ErrInvalidIdentity", name, err)
			}
			if err := Recover("x", nil, nil, id); !errors.Is(err, ErrInvalidIdentity) {
				t.Fatalf("Recover with %s = %v, want ErrInvalidIdentity", name, err)
			}
		})
	}
}

// Issue #14, finding 3: a secret key where a recipient belongs is refused,
// in every shape, and no part of it is echoed.
func TestParseRecipient_SecretInAnyShape_RefusedWithoutEcho(t *testing.T) {
	x := newX25519(t)
	hybrid := newHybrid(t)
	pemKey := strings.TrimSpace(string(sshEd25519PEM(t)))
	secrets := map[string]string{
		"X25519":  x.String(),
		"hybrid":  hybrid.String(),
		"plugin":  "AGE-PLUGIN-YUBIKEY-1QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ",
		"PEM":     pemKey,
		"RSA PEM": strings.TrimSpace(string(sshRSAPEM(t))),
		"PKCS8":   "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIKWVLiTRxF26FBwuf3ndNJPDvWuLYMlzTwXf1KvnuhWJ\n-----END PRIVATE KEY-----",
	}
	for kind, secret := range secrets {
		shapes := map[string]string{
			"exact":          secret,
			"double-quoted":  `"` + secret + `"`,
			"single-quoted":  `'` + secret + `'`,
			"lower-case":     strings.ToLower(secret),
			"embedded":       "recipient=" + secret + " # mine",
			"after a space":  "age1 " + secret,
			"with newline":   secret + "\n",
			"inside a value": "CAIRN_STATE_RECIPIENTS=" + strings.ToLower(secret[:len(secret)/2]) + secret[len(secret)/2:],
		}
		for shape, s := range shapes {
			t.Run(kind+"/"+shape, func(t *testing.T) {
				_, err := ParseRecipient(s)
				if !errors.Is(err, ErrInvalidRecipient) {
					t.Fatalf("got %v, want ErrInvalidRecipient", err)
				}
				if !strings.Contains(err.Error(), "secret") {
					t.Errorf("error %q does not say the input is a secret key", err)
				}
				assertNoPartEchoed(t, err.Error(), secret)
			})
		}
	}
}

// assertNoPartEchoed fails if msg contains any 8-character window of secret
// (case-insensitively) beyond the well-known prefixes.
func assertNoPartEchoed(t *testing.T, msg, secret string) {
	t.Helper()
	low := strings.ToLower(msg)
	body := secret
	for _, p := range []string{"AGE-SECRET-KEY-PQ-1", "AGE-SECRET-KEY-1", "AGE-PLUGIN-YUBIKEY-1"} {
		body = strings.TrimPrefix(body, p)
	}
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "-----") {
			continue
		}
		for i := 0; i+8 <= len(line); i++ {
			if w := strings.ToLower(line[i : i+8]); strings.Contains(low, w) {
				t.Fatalf("error %q echoes part of the secret (%q)", msg, w)
			}
		}
	}
}

// Issue #14, finding 4: bad (non-secret) input is echoed only in a short,
// truncated form.
func TestParseRecipient_BadInput_EchoedShortOnly(t *testing.T) {
	long := "age1" + strings.Repeat("q", 200)
	_, err := ParseRecipient(long)
	if !errors.Is(err, ErrInvalidRecipient) {
		t.Fatalf("got %v, want ErrInvalidRecipient", err)
	}
	if strings.Contains(err.Error(), strings.Repeat("q", 20)) {
		t.Fatalf("error %q echoes more than a short prefix of the input", err)
	}
	_, err = ParseRecipient("hunter2-not-a-key")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error %v echoes input of an unknown shape", err)
	}
}

// Issue #14, finding 4: an object whose age header the stock age parser
// rejects must not open, even when everything else about it is genuine: it
// would open here and not with `age -d`.
func TestOpen_AgeHeaderStockAgeRejects_Refused(t *testing.T) {
	id := newX25519(t)
	sid := NewStoreID()
	e := mustNew(t, []age.Identity{id}, nil, Options{StoreID: sid})
	sealed := mustSeal(t, e, "obj", []byte("payload"))
	hdr, err := parseHeader("obj", sealed)
	if err != nil {
		t.Fatal(err)
	}
	fk := fileKeyOf(t, sealed, id)
	for what, extra := range map[string]string{
		"a body line that is not base64": "-> junk\n!!!!\n",
		"a stanza without a short line":  "-> junk\n" + strings.Repeat("A", 64) + "\n",
		"an opening line without type":   "->\n\n",
		"a line that is no stanza":       "hello\n",
		"a stanza argument with a space": "-> junk a  b\n\n",
		"a body line too long":           "-> junk\n" + strings.Repeat("A", 68) + "\n",
	} {
		t.Run(what, func(t *testing.T) {
			ageFile := insertAgeStanza(t, hdr.age, fk, extra)
			if _, err := age.Decrypt(bytes.NewReader(ageFile), id); err == nil {
				t.Fatal("stock age accepts the modified age file; the test proves nothing")
			}
			obj := reseal(t, "obj", sid, hdr.recipients, authKeyOf(t, id, sid), fk, ageFile)
			if got, err := e.Open("obj", obj); !errors.Is(err, ErrTampered) || !strings.Contains(err.Error(), "stock age") {
				t.Fatalf("Open = %q, %v; want ErrTampered saying stock age refuses the header", got, err)
			}
			if err := Recover("obj", obj, nil, id); !errors.Is(err, ErrTampered) {
				t.Fatalf("Recover = %v, want ErrTampered", err)
			}
		})
	}
	// The control: the same construction with a well-formed extra stanza
	// opens, here and with stock age.
	ageFile := insertAgeStanza(t, hdr.age, fk, "-> junk arg\nAAAA\n")
	obj := reseal(t, "obj", sid, hdr.recipients, authKeyOf(t, id, sid), fk, ageFile)
	if got, err := e.Open("obj", obj); err != nil || string(got) != "payload" {
		t.Fatalf("control: Open = %q, %v", got, err)
	}
	if err := Recover("obj", obj, nil, id); err != nil {
		t.Fatalf("control: Recover = %v", err)
	}
}

// insertAgeStanza inserts raw lines before the footer of ageFile and fixes
// the age header MAC with the file key, as a writer who holds it could.
func insertAgeStanza(t testing.TB, ageFile, fileKey []byte, raw string) []byte {
	t.Helper()
	i := bytes.Index(ageFile, []byte(ageFooter))
	if i < 0 {
		t.Fatal("no age footer")
	}
	rest := ageFile[i+len(ageFooter)+ageMACB64Len+1:]
	var b bytes.Buffer
	b.Write(ageFile[:i+1])
	b.WriteString(raw)
	b.WriteString("---")
	hk, err := hkdf.Key(sha256.New, fileKey, nil, ageHeaderInfo, sha256.Size)
	if err != nil {
		t.Fatal(err)
	}
	m := hmac.New(sha256.New, hk)
	m.Write(b.Bytes())
	b.WriteString(" " + base64.RawStdEncoding.EncodeToString(m.Sum(nil)) + "\n")
	b.Write(rest)
	return b.Bytes()
}

// Identity files: age's parse errors can quote a character of a malformed
// key; ours name the line and its shape only.
func TestParseIdentities_MalformedKey_ErrorQuotesNothing(t *testing.T) {
	good := newX25519(t).String()
	hybrid := newHybrid(t)
	corrupt := good[:20] + "b" + good[21:] // 'b' is not in the Bech32 alphabet
	last := "Q"                            // another last character: the checksum no longer holds
	if strings.HasSuffix(good, last) {
		last = "P"
	}
	cases := map[string]struct{ file, secret, want string }{
		"malformed X25519":    {"# mine\n" + corrupt + "\n", corrupt, "line 2 is a malformed X25519 identity"},
		"bad checksum":        {good[:len(good)-1] + last + "\n", good, "line 1 is a malformed X25519 identity"},
		"malformed hybrid":    {hybrid.String()[:60] + "\n", hybrid.String()[:60], "malformed post-quantum identity"},
		"lower case":          {strings.ToLower(good) + "\n", good, "lower case"},
		"quoted":              {`"` + good + `"` + "\n", good, "text around an identity"},
		"second of two lines": {good + "\n" + corrupt + "\n", corrupt, "line 2"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseIdentities(strings.NewReader(c.file))
			if !errors.Is(err, ErrInvalidIdentity) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ErrInvalidIdentity saying %q", err, c.want)
			}
			assertNoPartEchoed(t, err.Error(), c.secret)
		})
	}
}
