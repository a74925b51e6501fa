package envelope

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"

	"filippo.io/age"
	"golang.org/x/crypto/ssh"
)

// ScryptRecipientText is the text form of a passphrase (scrypt) recipient
// in a recipient set: it has no public key, so it is named by its kind.
// [ParseRecipient] accepts it and returns a stand-in that [New] replaces
// with the configured [PassphraseIdentity]'s own recipient.
const ScryptRecipientText = "scrypt"

// ParseRecipient parses one public recipient: an X25519 key (age1…), a
// post-quantum hybrid key (age1pq1…), an SSH public key line (ssh-ed25519 …
// or ssh-rsa …, as in authorized_keys), or [ScryptRecipientText].
//
// Input that looks like secret key material anywhere in the string, in any
// case — an age identity (AGE-SECRET-KEY-…, AGE-SECRET-KEY-PQ-…), an age
// plugin identity (AGE-PLUGIN-…), a PEM block (-----BEGIN …, private keys
// included) — is refused with an error that quotes none of it. Other bad
// input is quoted only when it starts like a recipient (age1, ssh-), and
// then only its first 16 characters; otherwise the error gives its length
// alone. Errors wrap [ErrInvalidRecipient].
func ParseRecipient(s string) (age.Recipient, error) {
	if what := secretShape(s); what != "" {
		return nil, fmt.Errorf("%w: this looks like secret key material (%s), not a recipient; it is not repeated here (age-keygen -y prints an identity's recipient)", ErrInvalidRecipient, what)
	}
	s = strings.TrimSpace(s)
	var (
		r   age.Recipient
		err error
	)
	switch {
	case s == ScryptRecipientText:
		return scryptStandIn{}, nil
	case strings.HasPrefix(s, "age1pq1"):
		if r, err = age.ParseHybridRecipient(s); err != nil {
			err = bech32Reason("age1pq", s, "post-quantum recipient")
		}
	case strings.HasPrefix(s, "age1"):
		if r, err = age.ParseX25519Recipient(s); err != nil {
			err = bech32Reason("age", s, "X25519 recipient")
		}
	case strings.HasPrefix(s, "ssh-ed25519 "), strings.HasPrefix(s, "ssh-rsa "):
		var pk ssh.PublicKey
		if pk, _, _, _, err = ssh.ParseAuthorizedKey([]byte(s)); err == nil {
			r, err = newSSHRecipient(pk)
		}
		if err != nil {
			err = errors.New("not a valid SSH public key line")
		}
	default:
		err = errors.New("unknown recipient type; want age1…, age1pq1…, ssh-ed25519 …, ssh-rsa … or scrypt")
	}
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrInvalidRecipient, safeForm(s), err)
	}
	return r, nil
}

// bech32Reason says why s is not a recipient of the given Bech32 prefix,
// without quoting it.
func bech32Reason(hrp, s, what string) error {
	if hrp == "age" && strings.Contains(s[len("age1"):], "1") { // '1' is not in the Bech32 data alphabet
		return fmt.Errorf("not an %s (a plugin recipient, age1NAME1…, is not supported)", what)
	}
	if _, err := bech32Decode(hrp, s); err != nil {
		return fmt.Errorf("not a valid %s: %s", what, strings.TrimPrefix(bech32ErrorKind(err), "bech32: "))
	}
	return fmt.Errorf("not a valid %s (wrong key length)", what)
}

// bech32ErrorKind drops the character bech32Decode quotes for an invalid
// character.
func bech32ErrorKind(err error) string {
	if m := err.Error(); strings.Contains(m, "invalid character") {
		return "invalid character"
	}
	return err.Error()
}

// secretShape names the kind of secret material s looks like, or returns
// "". It looks case-insensitively anywhere in the string, so that quotes,
// surrounding text or a lower-cased key do not hide it.
func secretShape(s string) string {
	low := strings.ToLower(s)
	switch {
	case strings.Contains(low, "age-secret-key-"):
		return "an age identity"
	case strings.Contains(low, "age-plugin-"):
		return "an age plugin identity"
	case strings.Contains(low, "private key"), strings.Contains(low, "-----begin"):
		return "a PEM block, perhaps a private key"
	}
	return ""
}

// safeForm is how bad, non-secret input appears in an error: its first 16
// characters when it starts like a recipient (and is plain ASCII), else
// only its length.
func safeForm(s string) string {
	const keep = 16
	public := strings.HasPrefix(s, "age1") || strings.HasPrefix(s, "ssh-")
	for i := 0; i < len(s) && i < keep; i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			public = false
		}
	}
	switch {
	case !public:
		return fmt.Sprintf("(%d characters, not repeated)", len(s))
	case len(s) > keep:
		return fmt.Sprintf("%q… (%d characters)", s[:keep], len(s))
	}
	return fmt.Sprintf("%q", s)
}

// scryptStandIn is what ParseRecipient returns for ScryptRecipientText: a
// recipient set names a passphrase by its kind only, and New seals with the
// passphrase identity's own scrypt recipient instead.
type scryptStandIn struct{}

func (scryptStandIn) String() string { return ScryptRecipientText }

func (scryptStandIn) Wrap([]byte) ([]*age.Stanza, error) {
	return nil, fmt.Errorf("%w: the %q recipient stands for a passphrase identity, which must be configured", ErrInvalidRecipient, ScryptRecipientText)
}

// RecipientString returns the text form of r that a recipient set records
// and hashes: age1… for X25519 (as age-keygen -y prints it), age1pq1… for
// post-quantum keys, the authorized_keys line without comment for SSH keys
// (from [ParseRecipient] or an [SSHIdentity]), [ScryptRecipientText] for a
// passphrase, and a plugin recipient's own string. Recipients with no text
// form (a bare agessh recipient, a custom type without String) fail with
// [ErrInvalidRecipient].
func RecipientString(r age.Recipient) (string, error) {
	switch r := r.(type) {
	case nil:
		return "", fmt.Errorf("%w: nil recipient", ErrInvalidRecipient)
	case *age.ScryptRecipient, scryptStandIn:
		return ScryptRecipientText, nil
	case fmt.Stringer:
		s := r.String()
		if s == "" || strings.ContainsAny(s, "\n\r") || secretShape(s) != "" {
			return "", fmt.Errorf("%w: a %T has no usable text form", ErrInvalidRecipient, r)
		}
		return s, nil
	}
	return "", fmt.Errorf("%w: a %T has no text form; parse recipients with ParseRecipient (SSH keys included)", ErrInvalidRecipient, r)
}

// recipientsDigest is the digest a header authenticates: SHA-256 of a
// label line, then each text form followed by a newline, sorted and
// without duplicates (ADR 0003).
func recipientsDigest(texts []string) [32]byte {
	sorted := slices.Clone(texts)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	h := sha256.New()
	h.Write([]byte("cairn-state/v2 recipients\n"))
	for _, t := range sorted {
		h.Write([]byte(t))
		h.Write([]byte{'\n'})
	}
	var d [32]byte
	h.Sum(d[:0])
	return d
}
