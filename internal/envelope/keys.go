package envelope

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rsa"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"unicode/utf8"

	"filippo.io/age"
	"filippo.io/age/agessh"
	"golang.org/x/crypto/scrypt"
	"golang.org/x/crypto/ssh"
)

// maxIdentityFile bounds what ParseIdentities reads.
const maxIdentityFile = 1 << 20

// DefaultWorkFactor is the scrypt work factor (log2 N) that
// [NewPassphraseIdentity] uses when given 0. It is age's own default.
const DefaultWorkFactor = 18

// ParseIdentities parses an identity file: either the output of age-keygen
// (one AGE-SECRET-KEY-1… or AGE-SECRET-KEY-PQ-1… per line; empty lines and
// lines starting with '#' are ignored; several keys allowed) or one
// unencrypted OpenSSH/PEM private key (ed25519 or RSA), returned as an
// [*SSHIdentity]. Anything else fails with an error wrapping
// [ErrInvalidIdentity] that never quotes the file's content.
func ParseIdentities(r io.Reader) ([]age.Identity, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxIdentityFile+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading identities: %w", ErrInvalidIdentity, err)
	}
	if len(data) > maxIdentityFile {
		return nil, fmt.Errorf("%w: identity file larger than %d bytes", ErrInvalidIdentity, maxIdentityFile)
	}
	if bytes.Contains(data, []byte("-----BEGIN ")) && bytes.Contains(data, []byte("PRIVATE KEY-----")) {
		id, err := ParseSSHIdentity(data)
		if err != nil {
			return nil, err
		}
		return []age.Identity{id}, nil
	}
	ids, err := age.ParseIdentities(bytes.NewReader(data))
	if err != nil {
		// age's errors can quote a character of a malformed key: say what
		// is wrong in our own words, naming the line only.
		return nil, fmt.Errorf("%w: %s: expected age-keygen output (AGE-SECRET-KEY-1… lines) or an unencrypted SSH private key", ErrInvalidIdentity, describeBadIdentities(data))
	}
	return ids, nil
}

// describeBadIdentities says why age refused an identity file, quoting no
// part of it.
func describeBadIdentities(data []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, maxIdentityFile+1)
	n, keys := 0, 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		keys++
		if _, err := age.ParseIdentities(strings.NewReader(line)); err == nil {
			continue
		}
		low := strings.ToLower(strings.TrimSpace(line))
		switch {
		case !utf8.ValidString(line):
			return fmt.Sprintf("line %d is not valid UTF-8", n)
		case strings.HasPrefix(line, "AGE-SECRET-KEY-PQ-1"):
			return fmt.Sprintf("line %d is a malformed post-quantum identity", n)
		case strings.HasPrefix(line, "AGE-SECRET-KEY-1"):
			return fmt.Sprintf("line %d is a malformed X25519 identity", n)
		case strings.HasPrefix(low, "age-secret-key-"):
			return fmt.Sprintf("line %d is an identity in lower case or with surrounding text; age identities are upper case and alone on their line", n)
		case strings.Contains(low, "age-secret-key-"):
			return fmt.Sprintf("line %d has text around an identity; age identities are alone on their line", n)
		case strings.HasPrefix(low, "age-plugin-"):
			return fmt.Sprintf("line %d is an age plugin identity, which cannot be used", n)
		case strings.HasPrefix(low, "age1"), strings.HasPrefix(low, "ssh-"):
			return fmt.Sprintf("line %d looks like a public key (an identity is the secret half)", n)
		}
		return fmt.Sprintf("line %d is not an age identity", n)
	}
	if keys == 0 {
		return "no identities in the file"
	}
	return "the file is not an identity file"
}

// LoadIdentityFile reads and parses the identity file at path (see
// [ParseIdentities]). Errors name the path.
func LoadIdentityFile(path string) ([]age.Identity, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: identity file %s: %w", ErrInvalidIdentity, path, err)
	}
	defer f.Close()
	ids, err := ParseIdentities(f)
	if err != nil {
		return nil, fmt.Errorf("identity file %s: %w", path, err)
	}
	return ids, nil
}

// RecipientOf returns the recipient that seals to id: the public half of an
// X25519, hybrid or SSH identity, or the scrypt recipient of a
// [*PassphraseIdentity]. Its String method, where it has one, gives the
// text form (age1… for X25519), as age-keygen -y prints it.
func RecipientOf(id age.Identity) (age.Recipient, error) {
	switch id := id.(type) {
	case *age.X25519Identity:
		return id.Recipient(), nil
	case *age.HybridIdentity:
		return id.Recipient(), nil
	case *SSHIdentity:
		return id.Recipient(), nil
	case *PassphraseIdentity:
		return id.Recipient(), nil
	case *agessh.Ed25519Identity:
		return id.Recipient(), nil
	case *agessh.RSAIdentity:
		return id.Recipient(), nil
	case nil:
		return nil, fmt.Errorf("%w: nil identity", ErrInvalidIdentity)
	}
	return nil, fmt.Errorf("%w: cannot derive a recipient from a %T", ErrInvalidIdentity, id)
}

// SSHIdentity is an SSH private key (ssh-ed25519 or ssh-rsa) used as an
// envelope identity. Unlike a bare agessh identity it keeps what the
// envelope needs to derive its authentication key. Create it with
// [ParseSSHIdentity] or [ParseIdentities].
type SSHIdentity struct {
	id        age.Identity
	recipient age.Recipient
	kind      string
	secret    []byte
}

// ParseSSHIdentity parses an unencrypted OpenSSH or PEM private key
// (ed25519 or RSA). Passphrase-protected keys are refused: remove the
// passphrase (ssh-keygen -p) or, better, use a dedicated age identity.
func ParseSSHIdentity(pemBytes []byte) (*SSHIdentity, error) {
	k, err := ssh.ParseRawPrivateKey(pemBytes)
	if err != nil {
		var missing *ssh.PassphraseMissingError
		if errors.As(err, &missing) {
			return nil, fmt.Errorf("%w: the SSH private key is passphrase-protected, which is not supported; use an age identity (age-keygen) for the state", ErrInvalidIdentity)
		}
		return nil, fmt.Errorf("%w: SSH private key: %w", ErrInvalidIdentity, err)
	}
	switch k := k.(type) {
	case *ed25519.PrivateKey:
		return newSSHEd25519(*k)
	case ed25519.PrivateKey:
		return newSSHEd25519(k)
	case *rsa.PrivateKey:
		id, err := agessh.NewRSAIdentity(k)
		if err != nil {
			return nil, fmt.Errorf("%w: SSH RSA key: %w", ErrInvalidIdentity, err)
		}
		return newSSHIdentity(id, &k.PublicKey, "ssh-rsa", k.D.Bytes())
	}
	return nil, fmt.Errorf("%w: unsupported SSH key type %T; use ed25519 or RSA", ErrInvalidIdentity, k)
}

func newSSHEd25519(k ed25519.PrivateKey) (*SSHIdentity, error) {
	id, err := agessh.NewEd25519Identity(k)
	if err != nil {
		return nil, fmt.Errorf("%w: SSH ed25519 key: %w", ErrInvalidIdentity, err)
	}
	return newSSHIdentity(id, k.Public(), "ssh-ed25519", k.Seed())
}

func newSSHIdentity(id age.Identity, pub any, kind string, secret []byte) (*SSHIdentity, error) {
	pk, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("%w: SSH %s key: %w", ErrInvalidIdentity, kind, err)
	}
	r, err := newSSHRecipient(pk)
	if err != nil {
		return nil, fmt.Errorf("%w: SSH %s key: %w", ErrInvalidIdentity, kind, err)
	}
	return &SSHIdentity{id: id, recipient: r, kind: kind, secret: secret}, nil
}

// sshRecipient is an agessh recipient that also prints as its
// authorized_keys line, so that recipients can be compared and shown.
type sshRecipient struct {
	age.Recipient
	line string
}

func newSSHRecipient(pk ssh.PublicKey) (*sshRecipient, error) {
	var (
		r   age.Recipient
		err error
	)
	switch pk.Type() {
	case ssh.KeyAlgoED25519:
		r, err = agessh.NewEd25519Recipient(pk)
	case ssh.KeyAlgoRSA:
		r, err = agessh.NewRSARecipient(pk)
	default:
		err = fmt.Errorf("unsupported SSH key type %s", pk.Type())
	}
	if err != nil {
		return nil, err
	}
	return &sshRecipient{Recipient: r, line: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pk)))}, nil
}

// String returns the authorized_keys form of the key, without comment.
func (r *sshRecipient) String() string { return r.line }

// Unwrap implements [age.Identity].
func (i *SSHIdentity) Unwrap(stanzas []*age.Stanza) ([]byte, error) { return i.id.Unwrap(stanzas) }

// Recipient returns the SSH public key as an age recipient. Its String
// method returns the key's authorized_keys line ("ssh-ed25519 AAAA…").
func (i *SSHIdentity) Recipient() age.Recipient { return i.recipient }

// PassphraseIdentity is a passphrase used as an envelope identity: objects
// are sealed to an age scrypt recipient (so the stock age tool opens them
// with the passphrase) and authenticated with a key derived from the
// passphrase with scrypt, salted with the store id of the envelope
// ([Options.StoreID]). A passphrase must be the only identity and
// recipient of an envelope (age refuses to mix scrypt with other
// recipients). Create it with [NewPassphraseIdentity]; the zero value is
// refused by [New].
type PassphraseIdentity struct {
	id         *age.ScryptIdentity
	recipient  *age.ScryptRecipient
	workFactor int
	passphrase []byte

	mu   sync.Mutex
	keys map[string][]byte // scrypt outputs, by salt
}

// MinWorkFactor is the lowest scrypt work factor (log2 N) that
// [NewPassphraseIdentity] accepts: 2^16 iterations and 64 MiB of memory per
// guess, a quarter of age's default ([DefaultWorkFactor]). About 0.14 s on
// the project's 2-core test machine.
const MinWorkFactor = 16

// maxWorkFactor is age's own upper bound for decryption (22).
const maxWorkFactor = 22

// maxPassKeys bounds the derivations a passphrase identity caches.
const maxPassKeys = 32

// NewPassphraseIdentity returns a passphrase identity. workFactor is the
// scrypt cost (log2 N, [MinWorkFactor]..22; 0 means [DefaultWorkFactor]).
// Nothing is derived here: [New] pays scrypt once for its store id (cached
// in the identity, so further envelopes for the same store do not pay it
// again), each Seal pays it once more for age's scrypt stanza, and Open
// never. The work factor is part of the authentication key: objects sealed
// with one work factor authenticate only with the same one.
func NewPassphraseIdentity(passphrase string, workFactor int) (*PassphraseIdentity, error) {
	if workFactor == 0 {
		workFactor = DefaultWorkFactor
	}
	if workFactor < MinWorkFactor || workFactor > maxWorkFactor {
		return nil, fmt.Errorf("%w: scrypt work factor %d outside %d..%d", ErrInvalidIdentity, workFactor, MinWorkFactor, maxWorkFactor)
	}
	return newPassphraseIdentity(passphrase, workFactor)
}

// newPassphraseIdentity is NewPassphraseIdentity without the minimum work
// factor, for the package's tests, which run scrypt under the race
// detector.
func newPassphraseIdentity(passphrase string, workFactor int) (*PassphraseIdentity, error) {
	if passphrase == "" {
		return nil, fmt.Errorf("%w: empty passphrase", ErrInvalidIdentity)
	}
	id, err := age.NewScryptIdentity(passphrase)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidIdentity, err)
	}
	id.SetMaxWorkFactor(workFactor)
	r, err := age.NewScryptRecipient(passphrase)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidIdentity, err)
	}
	r.SetWorkFactor(workFactor)
	return &PassphraseIdentity{id: id, recipient: r, workFactor: workFactor, passphrase: []byte(passphrase)}, nil
}

// Unwrap implements [age.Identity].
func (i *PassphraseIdentity) Unwrap(stanzas []*age.Stanza) ([]byte, error) {
	return i.id.Unwrap(stanzas)
}

// Recipient returns the scrypt recipient that seals to this passphrase.
func (i *PassphraseIdentity) Recipient() age.Recipient { return i.recipient }

// WorkFactor returns the scrypt work factor (log2 N) it seals with.
func (i *PassphraseIdentity) WorkFactor() int { return i.workFactor }

// secret returns scrypt(passphrase, salt, 2^workFactor, 8, 1, 32), cached.
func (i *PassphraseIdentity) secret(salt string) []byte {
	i.mu.Lock()
	defer i.mu.Unlock()
	if s, ok := i.keys[salt]; ok {
		return s
	}
	s, err := scrypt.Key(i.passphrase, []byte(salt), 1<<i.workFactor, 8, 1, 32)
	if err != nil {
		panic("envelope: scrypt: " + err.Error()) // only for invalid parameters
	}
	if i.keys == nil {
		i.keys = map[string][]byte{}
	}
	if len(i.keys) < maxPassKeys {
		i.keys[salt] = s
	}
	return s
}

// storeSecret is the passphrase's secret for objects of store sid: the
// store id salts it, so one dictionary does not serve every deployment.
func (i *PassphraseIdentity) storeSecret(sid StoreID) []byte {
	return i.secret("cairn-state/v2 passphrase " + string(sid[:]))
}

// authKey is the symmetric key an identity contributes for authentication.
type authKey struct {
	kind string
	key  []byte // 32 bytes
	kid  []byte // 8 bytes
}

// writerSecret returns the kind and secret of an identity that can
// authenticate objects, or ok=false for identity types whose secret the
// envelope cannot reach (plugins, bare agessh identities). A passphrase's
// secret depends on the store: pass is returned instead.
func writerSecret(id age.Identity) (kind string, ikm []byte, pass *PassphraseIdentity, ok bool) {
	switch id := id.(type) {
	case *age.X25519Identity:
		return "X25519", []byte(id.String()), nil, true
	case *age.HybridIdentity:
		return "mlkem768x25519", []byte(id.String()), nil, true
	case *SSHIdentity:
		return id.kind, id.secret, nil, true
	case *PassphraseIdentity:
		return "scrypt", nil, id, true
	}
	return "", nil, nil, false
}

// deriveAuthKey derives an authentication key and its key id from an
// identity's kind and secret (ADR 0003).
func deriveAuthKey(kind string, ikm []byte) authKey {
	key, err := hkdf.Key(sha256.New, ikm, []byte(authKeySalt), labelPrefix+kind+" authentication key", 32)
	if err != nil {
		panic("envelope: hkdf: " + err.Error())
	}
	kid, err := hkdf.Key(sha256.New, key, nil, infoKeyID, kidLen)
	if err != nil {
		panic("envelope: hkdf: " + err.Error())
	}
	return authKey{kind: kind, key: key, kid: kid}
}

// checkIdentity refuses identities whose secret is missing: zero values of
// the package's types and of age's, which would authenticate with a key
// anyone can derive or crash later.
func checkIdentity(id age.Identity) error {
	switch id := id.(type) {
	case nil:
		return errors.New("nil identity")
	case *age.X25519Identity:
		s, ok := stringOf(id)
		if !ok {
			return errors.New("zero-value X25519 identity (no secret key)")
		}
		if _, err := age.ParseX25519Identity(s); err != nil {
			return errors.New("zero-value X25519 identity (no secret key)")
		}
	case *age.HybridIdentity:
		s, ok := stringOf(id)
		if !ok {
			return errors.New("zero-value post-quantum identity (no secret key)")
		}
		if _, err := age.ParseHybridIdentity(s); err != nil {
			return errors.New("zero-value post-quantum identity (no secret key)")
		}
	case *SSHIdentity:
		if id.id == nil || id.recipient == nil || len(id.secret) == 0 {
			return errors.New("zero-value SSHIdentity (create it with ParseSSHIdentity)")
		}
	case *PassphraseIdentity:
		if id.id == nil || id.recipient == nil || len(id.passphrase) == 0 {
			return errors.New("zero-value PassphraseIdentity (create it with NewPassphraseIdentity)")
		}
	}
	return nil
}

// stringOf calls String, which age's identities implement by dereferencing
// their keys: a zero value panics.
func stringOf(id fmt.Stringer) (s string, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return id.String(), true
}

// shorten cuts s to at most n bytes for an error message (names and store
// ids only; never secrets).
func shorten(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
