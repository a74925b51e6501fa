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

// Options configure an [Envelope]. The zero value
// means: unbound to any store, seal to the identities' recipients plus the
// extra ones, no recovery identity, warnings to [slog.Default].
type Options struct {
	// StoreID binds the envelope to a store: Seal writes it into every
	// object (authenticated), and Open refuses, before trying any key, an
	// object that carries another store id — or none — with a
	// [*ForeignStoreError]. Zero: unbound; Seal writes the zero id and Open
	// refuses objects bound to any store.
	StoreID StoreID

	// ExactRecipients makes the recipients given to [New] the exact set
	// Seal seals to (a store's recorded set), instead of the identities'
	// own recipients plus those. Only identities whose recipient is in the
	// set write authentication stanzas; the others (a retired key kept to
	// read objects not yet re-sealed) only open.
	ExactRecipients bool

	// Recovery are identities that may open objects no writer identity
	// authenticates — a recovery key that was a recipient but never wrote.
	// Open returns such an object's plaintext only when its file key came
	// from one of these (never from a writer identity), logs a warning,
	// and reports it in [Opened.Unauthenticated]; the object may be a
	// forgery by anyone who knows a public recipient. Tampered objects,
	// wrong keys and name mismatches still fail. Any age identity can be a
	// recovery identity (plugins and bare agessh identities included); none
	// may also be given as a writer identity. Recovery identities are not
	// sealed to.
	Recovery []age.Identity

	// Logger receives the warnings of unauthenticated opens; nil means
	// [slog.Default]. Secrets and plaintext are never logged.
	Logger *slog.Logger
}

// Envelope seals and opens objects bound to their names and, when bound,
// to their store. It is safe for concurrent use. Create it with [New].
type Envelope struct {
	storeID    StoreID
	writers    []writerKey    // one per authenticating identity, deduplicated
	readers    []age.Identity // the writers' identities, to tell a wrong key from a forgery
	recovery   []age.Identity
	sealers    []authKey       // keys of the writers whose recipient is in the sealing set
	recipients []age.Recipient // the sealing set
	texts      []string        // its text forms, sorted
	digest     [32]byte        // recipientsDigest(texts)
	logger     *slog.Logger
}

// writerKey is an identity that can authenticate objects.
type writerKey struct {
	key  authKey // for objects of the envelope's store
	text string  // its recipient's text form
}

// Opened describes an object that [Envelope.OpenWithInfo] opened.
type Opened struct {
	// StoreID is the store id the object carries: the envelope's (zero
	// for an unbound envelope).
	StoreID StoreID
	// RecipientsDigest is the digest of the recipient set the object was
	// sealed to. It is authenticated unless Unauthenticated is set.
	RecipientsDigest [32]byte
	// Stamp is what the object's header says about the write that made
	// it: the manifest generation, epoch and write sequence given to
	// [Envelope.SealStamped]. It is authenticated unless Unauthenticated
	// is set.
	Stamp Stamp
	// Writer is the process whose write made the object, as given to
	// [Envelope.SealStamped] (sealed in the header, encrypted). It is
	// authenticated unless Unauthenticated is set.
	Writer Writer
	// SameRecipients reports whether the object was sealed to exactly this
	// envelope's sealing set ([Envelope.Recipients]).
	SameRecipients bool
	// AuthenticatedBy is the recipient text form ([RecipientString]) of
	// the writer identity whose authentication stanza authenticated the
	// object — the first of the envelope's identities, in the order given
	// to [New], that has one; empty when Unauthenticated.
	AuthenticatedBy string
	// Unauthenticated reports that the object was opened with a recovery
	// identity ([Options.Recovery]) and no writer identity authenticated
	// it: it may be forged.
	Unauthenticated bool
}

// New returns an envelope that opens with any of identities, the writer
// identities, and seals to their recipients plus recipients (for example a
// recovery key) — or, with [Options.ExactRecipients], to recipients alone.
// Every object it seals carries an authentication stanza for each writer
// identity whose recipient is in the sealing set, so any holder of one of
// them can verify it. Writer identities must be able to authenticate: age
// X25519 and hybrid identities, [*SSHIdentity] and [*PassphraseIdentity];
// others can only be [Options.Recovery] identities. The zero Options are
// the defaults.
//
// New fails with [ErrInvalidIdentity] for a nil or zero-value identity (an
// empty secret), one that cannot authenticate, more than 16 writers that
// seal, a writer also given as a recovery identity, or a passphrase that is
// not the only identity and recipient; with [ErrInvalidRecipient] for a nil
// recipient, one without a text form ([RecipientString]), a scrypt stand-in
// without the passphrase identity, or a mix of post-quantum and classic
// recipients. A [*PassphraseIdentity] pays scrypt here, once per store id.
func New(identities []age.Identity, recipients []age.Recipient, o Options) (*Envelope, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	e := &Envelope{storeID: o.StoreID, logger: o.Logger}
	if len(identities) == 0 && len(o.Recovery) == 0 {
		return nil, fmt.Errorf("%w: at least one identity is required: the writer's identity keys the authentication of every object", ErrInvalidIdentity)
	}
	own := map[string]age.Recipient{} // recipient text → the identity's own recipient
	var ownOrder []string
	seenKid := map[string]bool{}
	var passphrase *PassphraseIdentity
	for i, id := range identities {
		if err := checkIdentity(id); err != nil {
			return nil, fmt.Errorf("%w: identity #%d: %w", ErrInvalidIdentity, i, err)
		}
		kind, ikm, pass, ok := writerSecret(id)
		if !ok {
			return nil, fmt.Errorf("%w: identity #%d (%T) cannot authenticate objects; load SSH keys with ParseIdentities or ParseSSHIdentity, use an age X25519 identity, or give it as Options.Recovery to read with it", ErrInvalidIdentity, i, id)
		}
		r, err := RecipientOf(id)
		if err != nil {
			return nil, err
		}
		text, err := RecipientString(r)
		if err != nil {
			return nil, fmt.Errorf("identity #%d: %w", i, err)
		}
		if pass != nil {
			passphrase = pass
			ikm = pass.storeSecret(o.StoreID)
		}
		k := deriveAuthKey(kind, ikm)
		if seenKid[string(k.kid)] {
			continue // the same key given twice
		}
		seenKid[string(k.kid)] = true
		e.writers = append(e.writers, writerKey{key: k, text: text})
		e.readers = append(e.readers, id)
		if _, dup := own[text]; !dup {
			own[text] = r
			ownOrder = append(ownOrder, text)
		}
	}
	for i, id := range o.Recovery {
		if err := checkIdentity(id); err != nil {
			return nil, fmt.Errorf("%w: recovery identity #%d: %w", ErrInvalidIdentity, i, err)
		}
		if isWriter(id, own, passphrase) {
			return nil, fmt.Errorf("%w: recovery identity #%d is also a writer identity: a writer's key never opens unauthenticated objects", ErrInvalidIdentity, i)
		}
		e.recovery = append(e.recovery, id)
	}

	set := map[string]age.Recipient{}
	var order []string
	add := func(text string, r age.Recipient) {
		if _, dup := set[text]; !dup {
			set[text] = r
			order = append(order, text)
		}
	}
	if o.ExactRecipients {
		if len(recipients) == 0 && len(identities) > 0 {
			return nil, fmt.Errorf("%w: Options.ExactRecipients needs the recipient set", ErrInvalidRecipient)
		}
	} else {
		for _, t := range ownOrder {
			add(t, own[t])
		}
	}
	for i, r := range recipients {
		if r == nil {
			return nil, fmt.Errorf("%w: recipient #%d is nil", ErrInvalidRecipient, i)
		}
		text, err := RecipientString(r)
		if err != nil {
			return nil, fmt.Errorf("recipient #%d: %w", i, err)
		}
		if mine, ok := own[text]; ok {
			r = mine // an identity's own recipient (a passphrase's real scrypt recipient)
		} else if _, standIn := r.(scryptStandIn); standIn {
			return nil, fmt.Errorf("%w: recipient #%d is %q, which needs the passphrase identity configured", ErrInvalidRecipient, i, ScryptRecipientText)
		}
		add(text, r)
	}
	for _, t := range order {
		e.recipients = append(e.recipients, fastRecipient(set[t]))
	}
	e.texts = slices.Sorted(slices.Values(order))
	e.digest = recipientsDigest(order)
	for _, w := range e.writers {
		if _, ok := set[w.text]; ok {
			e.sealers = append(e.sealers, w.key)
		}
	}
	if len(e.sealers) > maxKeyStanzas {
		return nil, fmt.Errorf("%w: %d identities, at most %d can authenticate an object", ErrInvalidIdentity, len(e.sealers), maxKeyStanzas)
	}
	if passphrase != nil && (len(e.writers) > 1 || len(e.recipients) > 1) {
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

// isWriter reports whether a recovery identity is one of the writer
// identities: the same recipient, or the same passphrase.
func isWriter(id age.Identity, own map[string]age.Recipient, passphrase *PassphraseIdentity) bool {
	if p, ok := id.(*PassphraseIdentity); ok {
		return passphrase != nil && bytes.Equal(p.passphrase, passphrase.passphrase)
	}
	r, err := RecipientOf(id)
	if err != nil {
		return false
	}
	text, err := RecipientString(r)
	if err != nil {
		return false
	}
	_, mine := own[text]
	return mine
}

// StoreID returns the store id the envelope is bound to (zero: unbound).
func (e *Envelope) StoreID() StoreID { return e.storeID }

// Recipients returns the text forms ([RecipientString]) of the recipient
// set Seal seals to, sorted: what a store records as its recipients.
func (e *Envelope) Recipients() []string { return slices.Clone(e.texts) }

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

// countAgeStanzas counts the recipient stanzas of an age file this package
// wrote: every stanza line starts with "-> " and no other line can.
func countAgeStanzas(ageFile []byte) int {
	hdr, _, err := splitAge(ageFile)
	if err != nil {
		return -1
	}
	return bytes.Count(hdr, []byte("\n-> "))
}

// Seal encrypts plaintext bound to name and to the envelope's store id,
// as [Envelope.SealStamped] does with a zero [Stamp] and no [Writer].
func (e *Envelope) Seal(name string, plaintext []byte) ([]byte, error) {
	return e.SealStamped(name, plaintext, Stamp{}, Writer{})
}

// SealStamped encrypts plaintext bound to name, to the envelope's store id,
// to stamp and to writer (sealed in the header, encrypted): to every
// recipient of the sealing set, with an authentication stanza for every
// writer identity in it. The header binds the SHA-256 of the age file
// whenever anyone but the one writer could learn the file key (more than
// one stanza; ADR 0004). It fails with [ErrInvalidName] for an empty or
// over-long name or a writer that does not fit its field
// ([MaxWriterLen]), with [ErrTooLarge] when the result would exceed
// [MaxSize], and with [ErrInvalidIdentity] when no writer identity is in
// the sealing set.
func (e *Envelope) SealStamped(name string, plaintext []byte, stamp Stamp, writer Writer) ([]byte, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if err := writer.check(name); err != nil {
		return nil, err
	}
	if len(e.sealers) == 0 {
		return nil, fmt.Errorf("envelope: sealing object %q: %w: none of the configured identities can authenticate objects sealed to this recipient set", name, ErrInvalidIdentity)
	}
	n := len(e.sealers)
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
	defer clear(fileKey)
	out := w.b
	if len(out) > MaxSize {
		return nil, fmt.Errorf("%w: sealing object %q: %d bytes sealed, more than %d", ErrTooLarge, name, len(out), MaxSize)
	}
	var contentHash []byte
	if bound := n > 1 || countAgeStanzas(out[h:]) != 1; bound {
		sum := sha256.Sum256(out[h:])
		contentHash = sum[:]
	}
	e.fillHeader(out[:h], name, int64(len(out)), contentHash, fileKey, stamp, writer)
	return out, nil
}

// fillHeader writes the envelope header of an object of total bytes
// sealed for name under fileKey into hdr (exactly the header's length),
// content-bound when contentHash (the SHA-256 of its age file) is not nil.
func (e *Envelope) fillHeader(hdr []byte, name string, total int64, contentHash, fileKey []byte, stamp Stamp, writer Writer) {
	copy(hdr, magic)
	hdr[offVersion] = formatVersion
	if contentHash != nil {
		hdr[offFlags] = flagContent
	}
	hdr[offCount] = byte(len(e.sealers))
	binary.BigEndian.PutUint16(hdr[offNameLen:], uint16(len(name)))
	binary.BigEndian.PutUint64(hdr[offTotal:], uint64(total))
	salt := hdr[offSalt : offSalt+saltLen]
	rand.Read(salt)
	copy(hdr[offStoreID:], e.storeID[:])
	copy(hdr[offRecipients:], e.digest[:])
	binary.BigEndian.PutUint64(hdr[offGeneration:], stamp.Generation)
	binary.BigEndian.PutUint64(hdr[offEpoch:], stamp.Epoch)
	binary.BigEndian.PutUint64(hdr[offSequence:], stamp.Sequence)
	copy(hdr[offContent:offWriter], contentHash) // zero when not bound
	sealWriterField(hdr[offWriter:fixedLen], writer, fileKey, salt, hdr[:offWriter])
	copy(hdr[fixedLen:], name)
	prefix := hdr[:fixedLen+len(name)]
	st := hdr[len(prefix):]
	for _, k := range e.sealers {
		copy(st, k.kid)
		copy(st[kidLen:], wrapFileKey(k.key, salt, stanzaAD(prefix, k.kid), fileKey))
		st = st[stanzaLen:]
	}
	copy(hdr[len(hdr)-macLen:], headerMAC(fileKey, salt, hdr[:len(hdr)-macLen]))
}

// Open authenticates and decrypts an object sealed for name, as
// [Envelope.OpenWithInfo] does, and returns its plaintext.
func (e *Envelope) Open(name string, sealed []byte) ([]byte, error) {
	pt, _, err := e.OpenWithInfo(name, sealed)
	return pt, err
}

// OpenWithInfo authenticates and decrypts an object sealed for name, and
// reports what a store's verify needs to know about it. Errors, each
// naming the object, in the order they are checked: [ErrTooLarge] (before
// any other work), [ErrNotEnvelope], [ErrTruncated], [ErrTampered] (a
// malformed layout); [ErrForeignStore] (a [*ForeignStoreError]), before
// any key is tried; [ErrTampered] (wrapping
// [ErrUnauthenticated] when no writer identity authenticates it),
// [ErrNoMatchingIdentity] (also wrapping *age.NoIdentityMatchError) and
// [ErrNameMismatch].
//
// Opening costs no public-key operation when one of the writer identities
// wrote the object: the file key comes from its authentication stanza. The
// age header is checked with age's own parser, so an object that opens
// here is one the stock age tool accepts.
func (e *Envelope) OpenWithInfo(name string, sealed []byte) ([]byte, Opened, error) {
	hdr, err := parseHeader(name, sealed)
	if err != nil {
		return nil, Opened{}, err
	}
	if err := e.checkBinding(name, hdr); err != nil {
		return nil, Opened{}, err
	}
	var contentHash []byte
	if hdr.bound() {
		sum := sha256.Sum256(hdr.age)
		contentHash = sum[:]
	}
	ageHdr, payload, err := splitAge(hdr.age)
	if err != nil {
		return nil, Opened{}, fmt.Errorf("%w: object %q: %w", ErrTampered, name, err)
	}
	fileKey, info, err := e.authenticate(name, hdr, ageHdr, contentHash, true)
	if err != nil {
		return nil, Opened{}, err
	}
	defer clear(fileKey)
	pt, err := decryptPayload(payload, fileKey)
	if err != nil {
		return nil, Opened{}, fmt.Errorf("%w: object %q: %w", ErrTampered, name, err)
	}
	return pt, info, nil
}

// checkBinding refuses, before any key is tried, an object of another
// store, or of none when the envelope is bound (and of one when it is not).
func (e *Envelope) checkBinding(name string, hdr *header) error {
	if hdr.storeID != e.storeID {
		return &ForeignStoreError{Name: name, Object: hdr.storeID, Envelope: e.storeID}
	}
	return nil
}

// authenticate does all of opening an object but decrypting its payload:
// it finds the file key (through a writer's authentication stanza, else a
// recovery identity through ageHdr, the age file's header), verifies the
// header MAC, the content hash when whole, the name and the writer field,
// and when whole the age header, and returns the file key, which the
// caller clears, and what it learnt. contentHash is the SHA-256 of the age
// file of a content-bound object (nil otherwise). Without whole (the
// header alone, [Envelope.OpenHeader]), the age file is not looked at
// beyond ageHdr, which may then be nil.
func (e *Envelope) authenticate(name string, hdr *header, ageHdr, contentHash []byte, whole bool) (_ []byte, _ Opened, err error) {
	info := Opened{StoreID: hdr.storeID, RecipientsDigest: hdr.recipients, Stamp: hdr.stamp}
	w, fileKey, found, err := e.unwrapWriter(name, hdr)
	if err != nil {
		return nil, Opened{}, err
	}
	defer func() {
		if err != nil {
			clear(fileKey)
		}
	}()
	info.AuthenticatedBy = w
	if found && !hdr.bound() && len(hdr.stanzas) != stanzaLen {
		return nil, Opened{}, fmt.Errorf("%w: object %q does not bind its content although it has %d key stanzas", ErrTampered, name, len(hdr.stanzas)/stanzaLen)
	}
	if !found {
		switch {
		case ageHdr != nil:
		case len(e.recovery) > 0:
			return nil, Opened{}, fmt.Errorf("%w: object %q: no authentication stanza of ours, and its age header, which a recovery identity opens, was not given", ErrTruncated, name)
		default:
			return nil, Opened{}, fmt.Errorf("%w: object %q: no authentication stanza for any configured identity (its age header was not read)", ErrNoMatchingIdentity, name)
		}
		if fileKey, err = e.recoveryKey(name, ageHdr); err != nil {
			return nil, Opened{}, err
		}
		info.Unauthenticated = true
	}
	if !hmac.Equal(headerMAC(fileKey, hdr.salt, hdr.macked), hdr.mac) {
		return nil, Opened{}, fmt.Errorf("%w: object %q: bad header MAC", ErrTampered, name)
	}
	if whole && hdr.bound() && !hmac.Equal(contentHash, hdr.content) {
		return nil, Opened{}, fmt.Errorf("%w: object %q: its age file is not the one its header binds", ErrTampered, name)
	}
	if info.Writer, err = openWriterField(name, hdr, fileKey); err != nil {
		return nil, Opened{}, err
	}
	if hdr.name != name {
		return nil, Opened{}, fmt.Errorf("%w: object %q was sealed as %q", ErrNameMismatch, name, shorten(hdr.name, 80))
	}
	if whole {
		ageStanzas, err := checkAgeHeader(ageHdr, fileKey)
		if err != nil {
			return nil, Opened{}, fmt.Errorf("%w: object %q: %w", ErrTampered, name, err)
		}
		if found && !hdr.bound() && ageStanzas != 1 {
			return nil, Opened{}, fmt.Errorf("%w: object %q does not bind its content although its age file has %d recipient stanzas", ErrTampered, name, ageStanzas)
		}
	}
	if info.Unauthenticated {
		e.logger.Warn("envelope: opened an UNAUTHENTICATED object with a recovery identity; it may be forged", "object", name)
	}
	info.SameRecipients = hdr.recipients == e.digest
	return fileKey, info, nil
}

// unwrapWriter finds the stanza of the first writer that has one and
// unwraps the file key; it returns that writer's recipient text form.
func (e *Envelope) unwrapWriter(name string, hdr *header) (string, []byte, bool, error) {
	for _, w := range e.writers {
		fk, found, err := unwrapStanza(name, hdr, []authKey{w.key})
		if err != nil || found {
			return w.text, fk, found, err
		}
	}
	return "", nil, false, nil
}

// unwrapStanza finds the stanza of one of keys and unwraps the file key.
func unwrapStanza(name string, hdr *header, keys []authKey) ([]byte, bool, error) {
	for st := hdr.stanzas; len(st) >= stanzaLen; st = st[stanzaLen:] {
		kid := st[:kidLen]
		for _, k := range keys {
			if !bytes.Equal(kid, k.kid) {
				continue
			}
			fk, ok := unwrapFileKey(k.key, hdr.salt, stanzaAD(hdr.prefix, kid), st[kidLen:stanzaLen])
			if !ok {
				return nil, false, fmt.Errorf("%w: object %q: its authentication stanza for our %s key does not verify", ErrTampered, name, k.kind)
			}
			return fk, true, nil
		}
	}
	return nil, false, nil
}

// recoveryKey handles an object no writer identity authenticates: a
// recovery identity may read it (its file key is returned); otherwise
// tell a wrong key from a forgery.
func (e *Envelope) recoveryKey(name string, ageHdr []byte) ([]byte, error) {
	// Each X25519 stanza costs a scalar multiplication per identity: bound
	// the work a hostile object can ask for.
	if n := bytes.Count(ageHdr, []byte("\n-> ")); n > maxAgeStanzas {
		return nil, fmt.Errorf("%w: object %q: %d age recipient stanzas, more than %d", ErrTampered, name, n, maxAgeStanzas)
	}
	var noMatch *age.NoIdentityMatchError
	if len(e.recovery) > 0 {
		fileKey, err := age.DecryptHeader(ageHdr, e.recovery...)
		if err == nil {
			return fileKey, nil
		}
		if !errors.As(err, &noMatch) {
			return nil, fmt.Errorf("%w: object %q: %w", ErrTampered, name, err)
		}
	}
	unauth := func(reason string) error {
		return fmt.Errorf("%w: %w: object %q: %s (only an identity given as a recovery identity reads it, unauthenticated)", ErrTampered, ErrUnauthenticated, name, reason)
	}
	if len(e.readers) > 0 {
		_, err := age.DecryptHeader(ageHdr, e.readers...)
		if err == nil {
			return nil, unauth("it decrypts with a writer identity but has no authentication stanza for any of them: it is forged, or was sealed by a writer whose identity is not configured")
		}
		if !errors.As(err, &noMatch) {
			return nil, fmt.Errorf("%w: object %q: %w", ErrTampered, name, err)
		}
	}
	return nil, fmt.Errorf("%w: object %q (sealed to %v): %w", ErrNoMatchingIdentity, name, noMatch.StanzaTypes, noMatch)
}

func checkName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty name", ErrInvalidName)
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("%w %q: %d bytes, more than %d", ErrInvalidName, shorten(name, 80), len(name), MaxNameLen)
	}
	return nil
}
