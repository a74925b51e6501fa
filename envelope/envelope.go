package envelope

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"filippo.io/age"
)

// Envelope seals and opens objects bound to their names. It is safe for
// concurrent use. Create it with [New].
type Envelope struct {
	keys         []authKey      // one per authenticating identity, deduplicated
	identities   []age.Identity // everything configured, for the age fallback
	recipients   []age.Recipient
	contentBound bool // some recipient is not one of our identities
	allowUnauth  bool
	logger       *slog.Logger
}

// Option configures an [Envelope].
type Option func(*options)

type options struct {
	allowUnauth bool
	logger      *slog.Logger
}

// AllowUnauthenticated is the emergency opt-in: Open then returns the
// plaintext of an object that decrypts with a configured identity but that
// no configured identity authenticates (see [ErrUnauthenticated]), logging a
// warning, instead of failing. Use it only to recover data with a key that
// was a recipient but never a writer (a recovery key); such an object may be
// a forgery by anyone who knows that recipient. Tampered objects, wrong keys
// and name mismatches still fail. With this option, identities that cannot
// authenticate (bare agessh identities, plugins) are accepted as readers.
func AllowUnauthenticated() Option { return func(o *options) { o.allowUnauth = true } }

// WithLogger sets the logger for warnings (only unauthenticated opens log);
// nil or absent means [slog.Default]. Secrets and plaintext are never logged.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// New returns an envelope that opens with any of identities and seals to the
// recipients of all identities plus recipients (for example a recovery
// key). Every object it seals carries an authentication stanza for each
// identity, so any holder of one of them can verify it; see the package doc
// for which identity types can authenticate.
//
// A [*PassphraseIdentity] must be the only identity and the only recipient.
// Post-quantum (hybrid) and classic recipients cannot be mixed.
func New(identities []age.Identity, recipients []age.Recipient, opts ...Option) (*Envelope, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	e := &Envelope{allowUnauth: o.allowUnauth, logger: o.logger}
	if len(identities) == 0 {
		return nil, fmt.Errorf("%w: at least one identity is required: the writer's identity keys the authentication of every object", ErrInvalidIdentity)
	}
	own := map[string]bool{} // recipient strings derived from identities
	seenKid := map[string]bool{}
	hasPassphrase := false
	for i, id := range identities {
		if id == nil {
			return nil, fmt.Errorf("%w: identity #%d is nil", ErrInvalidIdentity, i)
		}
		if _, ok := id.(*PassphraseIdentity); ok {
			hasPassphrase = true
		}
		k, ok := deriveAuthKey(id)
		if !ok && !o.allowUnauth {
			return nil, fmt.Errorf("%w: identity #%d (%T) cannot authenticate objects; load SSH keys with ParseIdentities or ParseSSHIdentity, or use an age X25519 identity", ErrInvalidIdentity, i, id)
		}
		if ok {
			if seenKid[string(k.kid)] {
				continue // the same key given twice
			}
			seenKid[string(k.kid)] = true
			e.keys = append(e.keys, k)
		}
		e.identities = append(e.identities, id)
		r, err := RecipientOf(id)
		if err != nil {
			if ok {
				return nil, err
			}
			continue // a reader-only identity (allowUnauth) with no derivable recipient
		}
		if !ok {
			// It learns file keys without being able to write: bind content.
			e.contentBound = true
		}
		if s := recipientString(r); s == "" || !own[s] {
			own[s] = true
			e.recipients = append(e.recipients, fastRecipient(r))
		}
	}
	if len(e.keys) > maxKeyStanzas {
		return nil, fmt.Errorf("%w: %d identities, at most %d can authenticate an object", ErrInvalidIdentity, len(e.keys), maxKeyStanzas)
	}
	for i, r := range recipients {
		if r == nil {
			return nil, fmt.Errorf("%w: recipient #%d is nil", ErrInvalidRecipient, i)
		}
		s := recipientString(r)
		if s != "" && own[s] {
			continue
		}
		e.contentBound = true
		e.recipients = append(e.recipients, fastRecipient(r))
	}
	if hasPassphrase && (len(identities) > 1 || len(e.recipients) > 1) {
		return nil, fmt.Errorf("%w: a passphrase identity must be the only identity and recipient (age cannot mix scrypt with other recipients)", ErrInvalidIdentity)
	}
	pq := 0
	for _, r := range e.recipients {
		if _, ok := r.(*age.HybridRecipient); ok {
			pq++
		}
	}
	if pq != 0 && pq != len(e.recipients) {
		return nil, fmt.Errorf("%w: post-quantum (age1pq1…) and classic recipients cannot be mixed", ErrInvalidRecipient)
	}
	return e, nil
}

func recipientString(r age.Recipient) string {
	if s, ok := r.(fmt.Stringer); ok {
		return s.String()
	}
	return ""
}

// captureRecipient records the file key age generates while delegating the
// stanza to the real recipient (labels included).
type captureRecipient struct {
	age.Recipient
	fileKey *[]byte
}

func (c captureRecipient) Wrap(fileKey []byte) ([]*age.Stanza, error) {
	*c.fileKey = slices.Clone(fileKey)
	return c.Recipient.Wrap(fileKey)
}

func (c captureRecipient) WrapWithLabels(fileKey []byte) ([]*age.Stanza, []string, error) {
	*c.fileKey = slices.Clone(fileKey)
	if l, ok := c.Recipient.(age.RecipientWithLabels); ok {
		return l.WrapWithLabels(fileKey)
	}
	s, err := c.Recipient.Wrap(fileKey)
	return s, nil, err
}

// appendWriter appends to a byte slice without copying it.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// ageOverhead bounds the size of an age file beyond its plaintext: header
// and stanzas (estimated), 16-byte nonce, 16-byte tag per 64 KiB chunk.
func ageOverhead(plaintext, recipients int) int {
	return 64 + 256*recipients + 16 + 16*(plaintext/(64<<10)+1)
}

// Seal encrypts plaintext bound to name: to every recipient of the
// envelope, with an authentication stanza for every identity. It fails with
// [ErrInvalidName] for an empty or over-long name, with [ErrTooLarge] when
// the result would exceed [MaxSize], and when the envelope holds no
// identity that can authenticate.
func (e *Envelope) Seal(name string, plaintext []byte) ([]byte, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if len(e.keys) == 0 {
		return nil, fmt.Errorf("envelope: sealing object %q: %w: no configured identity can authenticate objects", name, ErrInvalidIdentity)
	}
	n := len(e.keys)
	h := headerLen(len(name), n)
	// A lower bound of the sealed size, so hopeless plaintexts fail early.
	if minSealed := h + len(ageIntro) + len(ageFooter) + ageMACB64Len + 1 + streamNonce + len(plaintext) + 16*(len(plaintext)/chunkSize+1); len(plaintext) > MaxSize || minSealed > MaxSize {
		return nil, fmt.Errorf("%w: sealing object %q: %d bytes of plaintext, too many for a sealed object of at most %d", ErrTooLarge, name, len(plaintext), MaxSize)
	}
	w := &appendWriter{b: make([]byte, h, h+ageOverhead(len(plaintext), len(e.recipients))+len(plaintext))}
	var fileKey []byte
	rs := slices.Clone(e.recipients)
	rs[0] = captureRecipient{Recipient: rs[0], fileKey: &fileKey}
	aw, err := age.Encrypt(w, rs...)
	if err != nil {
		return nil, fmt.Errorf("envelope: sealing object %q: %w", name, err)
	}
	if _, err := aw.Write(plaintext); err != nil {
		return nil, fmt.Errorf("envelope: sealing object %q: %w", name, err)
	}
	if err := aw.Close(); err != nil {
		return nil, fmt.Errorf("envelope: sealing object %q: %w", name, err)
	}
	if len(fileKey) != fileKeyLen {
		return nil, fmt.Errorf("envelope: sealing object %q: age did not hand out a file key", name)
	}
	out := w.b
	if len(out) > MaxSize {
		return nil, fmt.Errorf("%w: sealing object %q: %d bytes sealed, more than %d", ErrTooLarge, name, len(out), MaxSize)
	}

	copy(out, magic)
	out[offVersion] = formatVersion
	if e.contentBound {
		out[offFlags] = flagContent
	}
	out[offCount] = byte(n)
	binary.BigEndian.PutUint16(out[offNameLen:], uint16(len(name)))
	binary.BigEndian.PutUint64(out[offTotal:], uint64(len(out)))
	salt := out[offSalt:fixedLen]
	rand.Read(salt)
	copy(out[fixedLen:], name)
	prefix := out[:fixedLen+len(name)]
	var contentHash []byte
	if e.contentBound {
		sum := sha256.Sum256(out[h:])
		contentHash = sum[:]
	}
	st := out[len(prefix):]
	for _, k := range e.keys {
		copy(st, k.kid)
		copy(st[kidLen:], wrapFileKey(k.key, salt, stanzaAD(prefix, k.kid, contentHash), fileKey))
		st = st[stanzaLen:]
	}
	copy(out[h-macLen:h], headerMAC(fileKey, salt, out[:h-macLen]))
	clear(fileKey)
	return out, nil
}

// Open authenticates and decrypts an object sealed for name. Errors, each
// naming the object: [ErrTooLarge] (before any other work),
// [ErrNotEnvelope], [ErrTruncated], [ErrTampered] (wrapping
// [ErrUnauthenticated] when no configured identity authenticates it),
// [ErrNoIdentity] (also wrapping *age.NoIdentityMatchError) and
// [ErrNameMismatch].
//
// Opening costs no public-key operation when one of the configured
// identities wrote the object: the file key comes from its authentication
// stanza.
func (e *Envelope) Open(name string, sealed []byte) ([]byte, error) {
	hdr, err := parseHeader(name, sealed)
	if err != nil {
		return nil, err
	}
	var contentHash []byte
	if hdr.flags&flagContent != 0 {
		sum := sha256.Sum256(hdr.age)
		contentHash = sum[:]
	}
	fileKey, found, err := e.unwrapStanza(name, hdr, contentHash)
	if err != nil {
		return nil, err
	}
	if !found {
		return e.openUnauthenticated(name, hdr)
	}
	if !hmac.Equal(headerMAC(fileKey, hdr.salt, hdr.macked), hdr.mac) {
		return nil, fmt.Errorf("%w: object %q: bad header MAC", ErrTampered, name)
	}
	if hdr.name != name {
		return nil, fmt.Errorf("%w: object %q was sealed as %q", ErrNameMismatch, name, shorten(hdr.name))
	}
	return decryptAge(name, hdr.age, fileKey)
}

// unwrapStanza finds the stanza of a configured key and unwraps the file key.
func (e *Envelope) unwrapStanza(name string, hdr *header, contentHash []byte) ([]byte, bool, error) {
	for st := hdr.stanzas; len(st) >= stanzaLen; st = st[stanzaLen:] {
		kid := st[:kidLen]
		for _, k := range e.keys {
			if !bytes.Equal(kid, k.kid) {
				continue
			}
			fk, ok := unwrapFileKey(k.key, hdr.salt, stanzaAD(hdr.prefix, kid, contentHash), st[kidLen:stanzaLen])
			if !ok {
				return nil, false, fmt.Errorf("%w: object %q: its authentication stanza for our %s key does not verify", ErrTampered, name, k.kind)
			}
			return fk, true, nil
		}
	}
	return nil, false, nil
}

// openUnauthenticated handles an object with no stanza for any configured
// key: tell a wrong key from a forgery, and in an emergency read it anyway.
func (e *Envelope) openUnauthenticated(name string, hdr *header) ([]byte, error) {
	ageHdr, err := age.ExtractHeader(bytes.NewReader(hdr.age))
	if err != nil {
		return nil, fmt.Errorf("%w: object %q: malformed age header: %w", ErrTampered, name, err)
	}
	// Each X25519 stanza costs a scalar multiplication per identity: bound
	// the work a hostile object can ask for.
	if n := bytes.Count(ageHdr, []byte("\n-> ")); n > maxAgeStanzas {
		return nil, fmt.Errorf("%w: object %q: %d age recipient stanzas, more than %d", ErrTampered, name, n, maxAgeStanzas)
	}
	fileKey, err := age.DecryptHeader(ageHdr, e.identities...)
	if err != nil {
		var noMatch *age.NoIdentityMatchError
		if errors.As(err, &noMatch) {
			return nil, fmt.Errorf("%w: object %q (sealed to %v): %w", ErrNoIdentity, name, noMatch.StanzaTypes, err)
		}
		return nil, fmt.Errorf("%w: object %q: %w", ErrTampered, name, err)
	}
	if !e.allowUnauth {
		return nil, fmt.Errorf("%w: %w: object %q decrypts with a configured identity but has no authentication stanza for any of them: it is forged, or was sealed by a writer whose identity is not configured (AllowUnauthenticated reads it in an emergency)", ErrTampered, ErrUnauthenticated, name)
	}
	if !hmac.Equal(headerMAC(fileKey, hdr.salt, hdr.macked), hdr.mac) {
		return nil, fmt.Errorf("%w: object %q: bad header MAC", ErrTampered, name)
	}
	if hdr.name != name {
		return nil, fmt.Errorf("%w: object %q was sealed as %q", ErrNameMismatch, name, shorten(hdr.name))
	}
	pt, err := decryptAge(name, hdr.age, fileKey)
	if err != nil {
		return nil, err
	}
	e.logger.Warn("envelope: opened an UNAUTHENTICATED object (AllowUnauthenticated); it may be forged", "object", name)
	return pt, nil
}

func checkName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty name", ErrInvalidName)
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("%w %q: %d bytes, more than %d", ErrInvalidName, shorten(name), len(name), MaxNameLen)
	}
	return nil
}
