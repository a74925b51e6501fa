package envelope

import (
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
		hint := ""
		if bytes.Contains(data, []byte("ssh-")) || bytes.Contains(data, []byte("age1")) {
			hint = " (this looks like a public key; an identity is the secret half)"
		}
		return nil, fmt.Errorf("%w: %v: expected age-keygen output (AGE-SECRET-KEY-1… lines) or an unencrypted SSH private key%s", ErrInvalidIdentity, err, hint)
	}
	return ids, nil
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

// ParseRecipient parses one public recipient: an X25519 key (age1…), a
// post-quantum hybrid key (age1pq1…), or an SSH public key line
// (ssh-ed25519 … or ssh-rsa …, as in authorized_keys).
func ParseRecipient(s string) (age.Recipient, error) {
	s = strings.TrimSpace(s)
	var (
		r   age.Recipient
		err error
	)
	switch {
	case strings.HasPrefix(s, "AGE-SECRET-KEY-"), strings.Contains(s, "PRIVATE KEY"):
		// Never echo secret material.
		return nil, fmt.Errorf("%w: this is a secret key, not a recipient (age-keygen -y prints the recipient)", ErrInvalidRecipient)
	case strings.HasPrefix(s, "age1pq1"):
		r, err = age.ParseHybridRecipient(s)
	case strings.HasPrefix(s, "age1"):
		r, err = age.ParseX25519Recipient(s)
	case strings.HasPrefix(s, "ssh-ed25519 "), strings.HasPrefix(s, "ssh-rsa "):
		var pk ssh.PublicKey
		if pk, _, _, _, err = ssh.ParseAuthorizedKey([]byte(s)); err == nil {
			r, err = newSSHRecipient(pk)
		}
	default:
		err = errors.New("unknown recipient type; want age1…, age1pq1…, ssh-ed25519 … or ssh-rsa …")
	}
	if err != nil {
		return nil, fmt.Errorf("%w %q: %w", ErrInvalidRecipient, shorten(s), err)
	}
	return r, nil
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
// with the passphrase) and authenticated with a key derived once from the
// passphrase. A passphrase must be the only identity and recipient of an
// envelope (age refuses to mix scrypt with other recipients).
type PassphraseIdentity struct {
	id         *age.ScryptIdentity
	recipient  *age.ScryptRecipient
	workFactor int
	secret     []byte
}

// NewPassphraseIdentity returns a passphrase identity. workFactor is the
// scrypt cost (log2 N, 1..22; 0 means [DefaultWorkFactor]). It is paid once
// here and once per Seal, never per Open, and it is part of the key: objects
// sealed with one work factor authenticate only with the same one.
func NewPassphraseIdentity(passphrase string, workFactor int) (*PassphraseIdentity, error) {
	if workFactor == 0 {
		workFactor = DefaultWorkFactor
	}
	if workFactor < 1 || workFactor > 22 {
		return nil, fmt.Errorf("%w: scrypt work factor %d outside 1..22", ErrInvalidIdentity, workFactor)
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
	secret, err := scrypt.Key([]byte(passphrase), []byte(authKeySalt+" passphrase"), 1<<workFactor, 8, 1, 32)
	if err != nil {
		return nil, fmt.Errorf("%w: scrypt: %w", ErrInvalidIdentity, err)
	}
	return &PassphraseIdentity{id: id, recipient: r, workFactor: workFactor, secret: secret}, nil
}

// Unwrap implements [age.Identity].
func (i *PassphraseIdentity) Unwrap(stanzas []*age.Stanza) ([]byte, error) {
	return i.id.Unwrap(stanzas)
}

// Recipient returns the scrypt recipient that seals to this passphrase.
func (i *PassphraseIdentity) Recipient() age.Recipient { return i.recipient }

// authKey is the symmetric key an identity contributes for authentication.
type authKey struct {
	kind string
	key  []byte // 32 bytes
	kid  []byte // 8 bytes
}

// deriveAuthKey returns the authentication key of id, or ok=false for
// identity types whose secret the envelope cannot reach (plugins, bare
// agessh identities).
func deriveAuthKey(id age.Identity) (authKey, bool) {
	var kind string
	var ikm []byte
	switch id := id.(type) {
	case *age.X25519Identity:
		kind, ikm = "X25519", []byte(id.String())
	case *age.HybridIdentity:
		kind, ikm = "mlkem768x25519", []byte(id.String())
	case *SSHIdentity:
		kind, ikm = id.kind, id.secret
	case *PassphraseIdentity:
		kind, ikm = "scrypt", id.secret
	default:
		return authKey{}, false
	}
	key, err := hkdf.Key(sha256.New, ikm, []byte(authKeySalt), labelPrefix+kind+" authentication key", 32)
	if err != nil {
		panic("envelope: hkdf: " + err.Error())
	}
	kid, err := hkdf.Key(sha256.New, key, nil, infoKeyID, kidLen)
	if err != nil {
		panic("envelope: hkdf: " + err.Error())
	}
	return authKey{kind: kind, key: key, kid: kid}, true
}

func shorten(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
