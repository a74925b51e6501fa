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
	"strconv"

	"filippo.io/age"
)

// Options configure an [Envelope]. A nil *Options, like the zero value,
// means: unbound to any store, seal to the identities' recipients plus the
// extra ones, refuse legacy objects, no recovery identity, warnings to
// [slog.Default].
type Options struct {
	// StoreID binds the envelope to a store: Seal writes it into every
	// object (format v2, authenticated), and Open refuses, before trying
	// any key, an object that carries another store id, with a
	// [*ForeignStoreError]. Zero: unbound; Seal writes the zero id and Open
	// refuses objects bound to any store.
	StoreID StoreID

	// ExactRecipients makes the recipients given to [New] the exact set
	// Seal seals to (a store's recorded set), instead of the identities'
	// own recipients plus those. Only identities whose recipient is in the
	// set write authentication stanzas; the others (a retired key kept to
	// read objects not yet re-sealed) only open.
	ExactRecipients bool

	// AcceptLegacy makes Open accept objects bound to no store: format v1,
	// and v2 objects sealed by an unbound envelope (when the envelope is
	// bound). Without it they fail with [ErrLegacyFormat]. A store accepts
	// them until a rekey has rewritten every object, then refuses them.
	AcceptLegacy bool

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
	storeID      StoreID
	acceptLegacy bool
	writers      []writer       // one per authenticating identity, deduplicated
	readers      []age.Identity // the writers' identities, to tell a wrong key from a forgery
	recovery     []age.Identity
	sealers      []authKey       // keys of the writers whose recipient is in the sealing set
	recipients   []age.Recipient // the sealing set
	texts        []string        // its text forms, sorted
	digest       [32]byte        // recipientsDigest(texts)
	logger       *slog.Logger
}

// writer is an identity that can authenticate objects.
type writer struct {
	key  authKey             // for v2 objects of the envelope's store, and v1 (except passphrases)
	pass *PassphraseIdentity // a passphrase: its v1 key depends on the object
	text string              // its recipient's text form
}

// Opened describes an object that [Envelope.OpenWithInfo] opened.
type Opened struct {
	// Version is the object's format version: [FormatV1] or [FormatV2].
	Version int
	// StoreID is the store id the object carries (zero for v1 and unbound
	// v2 objects); it equals the envelope's unless the object is a legacy
	// one accepted with [Options.AcceptLegacy].
	StoreID StoreID
	// RecipientsDigest is the digest of the recipient set the object was
	// sealed to (v2; zero for v1). It is authenticated unless
	// Unauthenticated is set.
	RecipientsDigest [32]byte
	// SameRecipients reports whether the object was sealed to exactly this
	// envelope's sealing set ([Envelope.Recipients]): always false for v1
	// objects, which do not record their set.
	SameRecipients bool
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
// others can only be [Options.Recovery] identities. opts may be nil.
//
// New fails with [ErrInvalidIdentity] for a nil or zero-value identity (an
// empty secret), one that cannot authenticate, more than 16 writers that
// seal, a writer also given as a recovery identity, or a passphrase that is
// not the only identity and recipient; with [ErrInvalidRecipient] for a nil
// recipient, one without a text form ([RecipientString]), a scrypt stand-in
// without the passphrase identity, or a mix of post-quantum and classic
// recipients. A [*PassphraseIdentity] pays scrypt here, once per store id.
func New(identities []age.Identity, recipients []age.Recipient, opts *Options) (*Envelope, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	e := &Envelope{storeID: o.StoreID, acceptLegacy: o.AcceptLegacy, logger: o.Logger}
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
		e.writers = append(e.writers, writer{key: k, pass: pass, text: text})
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

// Seal encrypts plaintext bound to name and to the envelope's store id
// (format v2): to every recipient of the sealing set, with an
// authentication stanza for every writer identity in it. The stanzas bind
// the SHA-256 of the age file whenever anyone but the one writer could
// learn the file key (more than one stanza; ADR 0004). It fails with
// [ErrInvalidName] for an empty or over-long name, with [ErrTooLarge] when
// the result would exceed [MaxSize], and with [ErrInvalidIdentity] when no
// writer identity is in the sealing set.
func (e *Envelope) Seal(name string, plaintext []byte) ([]byte, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if len(e.sealers) == 0 {
		return nil, fmt.Errorf("envelope: sealing object %q: %w: none of the configured identities can authenticate objects sealed to this recipient set", name, ErrInvalidIdentity)
	}
	n := len(e.sealers)
	h := headerLen(FormatV2, len(name), n)
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
	bound := n > 1 || countAgeStanzas(out[h:]) != 1

	copy(out, magic)
	out[offVersion] = FormatV2
	if bound {
		out[offFlags] = flagContent
	}
	out[offCount] = byte(n)
	binary.BigEndian.PutUint16(out[offNameLen:], uint16(len(name)))
	binary.BigEndian.PutUint64(out[offTotal:], uint64(len(out)))
	salt := out[offSalt : offSalt+saltLen]
	rand.Read(salt)
	copy(out[offStoreID:], e.storeID[:])
	copy(out[offRecipients:], e.digest[:])
	copy(out[fixedLenV2:], name)
	prefix := out[:fixedLenV2+len(name)]
	var contentHash []byte
	if bound {
		sum := sha256.Sum256(out[h:])
		contentHash = sum[:]
	}
	st := out[len(prefix):]
	for _, k := range e.sealers {
		copy(st, k.kid)
		copy(st[kidLen:], wrapFileKey(FormatV2, k.key, salt, stanzaAD(prefix, k.kid, contentHash), fileKey))
		st = st[stanzaLen:]
	}
	copy(out[h-macLen:h], headerMAC(FormatV2, fileKey, salt, out[:h-macLen]))
	return out, nil
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
// malformed layout); [ErrLegacyFormat] and [ErrForeignStore] (a
// [*ForeignStoreError]), before any key is tried; [ErrTampered] (wrapping
// [ErrUnauthenticated] when no writer identity authenticates it),
// [ErrNoIdentity] (also wrapping *age.NoIdentityMatchError) and
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
	info := Opened{Version: hdr.version, StoreID: hdr.storeID, RecipientsDigest: hdr.recipients}
	bound := hdr.flags&flagContent != 0
	var contentHash []byte
	if bound {
		sum := sha256.Sum256(hdr.age)
		contentHash = sum[:]
	}
	keys := e.keysFor(hdr)
	fileKey, found, err := unwrapStanza(name, hdr, keys, contentHash)
	if err != nil {
		return nil, Opened{}, err
	}
	if found && !bound {
		switch {
		case hdr.version == FormatV1 && hasOtherStanza(hdr, keys):
			clear(fileKey)
			return e.openUnauthenticated(name, hdr, info, "it is a legacy v1 object that does not bind its content and carries a key stanza for an identity this envelope does not hold, whose holder could have rewritten it")
		case hdr.version == FormatV2 && len(hdr.stanzas) != stanzaLen:
			return nil, Opened{}, fmt.Errorf("%w: object %q does not bind its content although it has %d key stanzas", ErrTampered, name, len(hdr.stanzas)/stanzaLen)
		}
	}
	if !found {
		return e.openUnauthenticated(name, hdr, info, "")
	}
	defer clear(fileKey)
	pt, ageStanzas, err := e.finishOpen(name, hdr, fileKey)
	if err != nil {
		return nil, Opened{}, err
	}
	if hdr.version == FormatV2 && !bound && ageStanzas != 1 {
		return nil, Opened{}, fmt.Errorf("%w: object %q does not bind its content although its age file has %d recipient stanzas", ErrTampered, name, ageStanzas)
	}
	info.SameRecipients = hdr.version == FormatV2 && hdr.recipients == e.digest
	return pt, info, nil
}

// checkBinding refuses, before any key is tried, an object of another
// store and a legacy one the envelope was not told to accept.
func (e *Envelope) checkBinding(name string, hdr *header) error {
	switch {
	case !hdr.storeID.IsZero() && hdr.storeID != e.storeID:
		return &ForeignStoreError{Name: name, Object: hdr.storeID, Envelope: e.storeID}
	case e.acceptLegacy:
		return nil
	case hdr.version == FormatV1:
		return fmt.Errorf("%w: object %q is format v1, bound to no store (a rekey rewrites it)", ErrLegacyFormat, name)
	case hdr.storeID.IsZero() && !e.storeID.IsZero():
		return fmt.Errorf("%w: object %q was sealed by an envelope bound to no store; this store is %s (a rekey rewrites it)", ErrLegacyFormat, name, e.storeID)
	}
	return nil
}

// finishOpen verifies the header MAC and the name under the file key and
// decrypts the age file; it returns the plaintext and the number of age
// recipient stanzas.
func (e *Envelope) finishOpen(name string, hdr *header, fileKey []byte) ([]byte, int, error) {
	if !hmac.Equal(headerMAC(hdr.version, fileKey, hdr.salt, hdr.macked), hdr.mac) {
		return nil, 0, fmt.Errorf("%w: object %q: bad header MAC", ErrTampered, name)
	}
	if hdr.name != name {
		return nil, 0, fmt.Errorf("%w: object %q was sealed as %q", ErrNameMismatch, name, shorten(hdr.name, 80))
	}
	return decryptAge(name, hdr.age, fileKey)
}

// keysFor returns the writers' keys for opening hdr: the envelope's own for
// v2; for v1, passphrases use the legacy salt and the work factor of the
// object's scrypt stanza.
func (e *Envelope) keysFor(hdr *header) []authKey {
	keys := make([]authKey, 0, len(e.writers))
	for _, w := range e.writers {
		if w.pass == nil || hdr.version == FormatV2 {
			keys = append(keys, w.key)
			continue
		}
		if wf, ok := scryptWorkFactor(hdr.age); ok && wf <= w.pass.workFactor {
			keys = append(keys, deriveAuthKey("scrypt", w.pass.legacySecret(wf)))
		}
	}
	return keys
}

// stanzaCollector hands the stanzas age's parser found to fn, and matches
// none of them.
type stanzaCollector func([]*age.Stanza)

func (c stanzaCollector) Unwrap(stanzas []*age.Stanza) ([]byte, error) {
	c(stanzas)
	return nil, age.ErrIncorrectIdentity
}

// scryptWorkFactor returns the work factor of the age file's scrypt
// stanza, in age's canonical encoding.
func scryptWorkFactor(ageFile []byte) (int, bool) {
	hdr, _, err := splitAge(ageFile)
	if err != nil {
		return 0, false
	}
	wf := 0
	age.DecryptHeader(hdr, stanzaCollector(func(st []*age.Stanza) {
		for _, s := range st {
			if s.Type == "scrypt" && len(s.Args) == 2 {
				if v, err := strconv.Atoi(s.Args[1]); err == nil && strconv.Itoa(v) == s.Args[1] {
					wf = v
				}
			}
		}
	}))
	return wf, wf >= 1 && wf <= maxWorkFactor
}

// unwrapStanza finds the stanza of one of keys and unwraps the file key.
func unwrapStanza(name string, hdr *header, keys []authKey, contentHash []byte) ([]byte, bool, error) {
	for st := hdr.stanzas; len(st) >= stanzaLen; st = st[stanzaLen:] {
		kid := st[:kidLen]
		for _, k := range keys {
			if !bytes.Equal(kid, k.kid) {
				continue
			}
			fk, ok := unwrapFileKey(hdr.version, k.key, hdr.salt, stanzaAD(hdr.prefix, kid, contentHash), st[kidLen:stanzaLen])
			if !ok {
				return nil, false, fmt.Errorf("%w: object %q: its authentication stanza for our %s key does not verify", ErrTampered, name, k.kind)
			}
			return fk, true, nil
		}
	}
	return nil, false, nil
}

// hasOtherStanza reports whether hdr has a key stanza for none of keys.
func hasOtherStanza(hdr *header, keys []authKey) bool {
	for st := hdr.stanzas; len(st) >= stanzaLen; st = st[stanzaLen:] {
		if !slices.ContainsFunc(keys, func(k authKey) bool { return bytes.Equal(k.kid, st[:kidLen]) }) {
			return true
		}
	}
	return false
}

// openUnauthenticated handles an object no writer identity authenticates
// (why says why, when a stanza of ours was found): a recovery identity may
// read it; otherwise tell a wrong key from a forgery.
func (e *Envelope) openUnauthenticated(name string, hdr *header, info Opened, why string) ([]byte, Opened, error) {
	ageHdr, _, err := splitAge(hdr.age)
	if err != nil {
		return nil, Opened{}, fmt.Errorf("%w: object %q: %w", ErrTampered, name, err)
	}
	// Each X25519 stanza costs a scalar multiplication per identity: bound
	// the work a hostile object can ask for.
	if n := bytes.Count(ageHdr, []byte("\n-> ")); n > maxAgeStanzas {
		return nil, Opened{}, fmt.Errorf("%w: object %q: %d age recipient stanzas, more than %d", ErrTampered, name, n, maxAgeStanzas)
	}
	var noMatch *age.NoIdentityMatchError
	if len(e.recovery) > 0 {
		fileKey, err := age.DecryptHeader(ageHdr, e.recovery...)
		if err == nil {
			defer clear(fileKey)
			pt, _, err := e.finishOpen(name, hdr, fileKey)
			if err != nil {
				return nil, Opened{}, err
			}
			info.Unauthenticated = true
			info.SameRecipients = hdr.version == FormatV2 && hdr.recipients == e.digest
			e.logger.Warn("envelope: opened an UNAUTHENTICATED object with a recovery identity; it may be forged", "object", name)
			return pt, info, nil
		}
		if !errors.As(err, &noMatch) {
			return nil, Opened{}, fmt.Errorf("%w: object %q: %w", ErrTampered, name, err)
		}
	}
	unauth := func(reason string) error {
		return fmt.Errorf("%w: %w: object %q: %s (only an identity given as a recovery identity reads it, unauthenticated)", ErrTampered, ErrUnauthenticated, name, reason)
	}
	if why != "" {
		return nil, Opened{}, unauth(why)
	}
	if len(e.readers) > 0 {
		_, err := age.DecryptHeader(ageHdr, e.readers...)
		if err == nil {
			return nil, Opened{}, unauth("it decrypts with a writer identity but has no authentication stanza for any of them: it is forged, or was sealed by a writer whose identity is not configured")
		}
		if !errors.As(err, &noMatch) {
			return nil, Opened{}, fmt.Errorf("%w: object %q: %w", ErrTampered, name, err)
		}
	}
	return nil, Opened{}, fmt.Errorf("%w: object %q (sealed to %v): %w", ErrNoIdentity, name, noMatch.StanzaTypes, noMatch)
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
