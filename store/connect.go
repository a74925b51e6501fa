package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"filippo.io/age"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/envelope"
)

// Keys are what a store is connected with: the identities that open (and
// write) its objects, extra recipients, and the emergency recovery
// identities.
type Keys struct {
	// Identities open the store's objects. Those whose recipient is in the
	// store's recipient set also authenticate what is written; the others
	// (a retired key kept to read objects not yet re-sealed) only open.
	Identities []age.Identity
	// Recipients are extra recipients in age's form (a recovery key, say).
	// With the identities' own recipients they make a new store's
	// recipient set; for an existing store they are only compared with its
	// set ([Store.RecipientDiff]): writers seal to the store's set.
	Recipients []age.Recipient
	// Recovery identities may open the application's objects (names not
	// starting with '.') that no identity authenticates: an emergency
	// opt-in (envelope.Options.Recovery); such objects may be forged. The
	// store never opens its reserved objects — the manifest, the lock's,
	// the migration log, rekey progress — with them.
	Recovery []age.Identity
}

// ConnectOptions configure [Connect]. A nil *ConnectOptions, like the zero
// value, means a read-only connection with the store's default options.
type ConnectOptions struct {
	// Options are the store's options (Root, MaxObjectSize, …).
	Options
	// Create makes the connection write-capable: a store without a
	// manifest gets one — a new store in FormatBound, a store older than
	// manifests in FormatLegacy once one of its objects opens with
	// Keys.Identities. Where the backend has conditional writes the
	// manifest is written at once, if absent; otherwise the caller must
	// call [Store.CommitManifest] once it holds the instance lock. Without
	// Create, a store without a manifest is opened as it is: its objects
	// (bound to no store) open, and writes fail with [ErrNoManifest].
	Create bool
}

// lockPrefix starts the names of the lock's objects (lock.ListPrefix;
// the store cannot import the lock).
const lockPrefix = ".lock"

// upgradeSample is how many objects of a store without a manifest Connect
// tries, at most, before it decides that the identities do not belong.
const upgradeSample = 16

// Connect opens the store of b as the holder of keys, checking first that
// the keys belong to it: it reads the store's manifest,
// <root>/.cairn-state/.store, before anything else, and returns a store
// whose objects are bound to the store's id and sealed to its recipient
// set (docs/adr/0021). It never touches the lock.
//
// Errors: a [*NotMemberError] (errors.Is [ErrNotMember]) when no identity
// opens the manifest — nothing is written; a [*ManifestError] ([ErrBadManifest])
// when the manifest is garbage, tampered or missing while the objects are
// bound to a store — it is neither re-created nor overwritten; the
// backend's error when the storage fails; envelope.ErrInvalidIdentity and
// envelope.ErrInvalidRecipient for unusable keys.
//
// With no identity and no recovery identity, the store is keyless: it
// lists and describes objects but opens and writes none, and the manifest
// is not read. With recovery identities only, it is an emergency read-only
// store bound to the id the manifest's header carries (unauthenticated):
// the application's objects open through the recovery identities, the
// reserved ones do not.
func Connect(ctx context.Context, b backend.Backend, keys Keys, opts *ConnectOptions) (*Store, error) {
	var o ConnectOptions
	if opts != nil {
		o = *opts
	}
	base, err := Open(b, &storeSealer{readOnly: true}, o.Options)
	if err != nil {
		return nil, err
	}
	if len(keys.Identities) == 0 {
		if o.Create {
			return nil, fmt.Errorf("store: connect: %w: a write-capable connection needs an identity", errNoKey)
		}
		if len(keys.Recovery) == 0 {
			return base, nil
		}
	}
	for attempt := 1; ; attempt++ {
		st, err := base.connectOnce(ctx, keys, o.Create)
		if errors.Is(err, errCreatedMeanwhile) && attempt < 4 {
			continue // another process created the manifest first: read theirs
		}
		return st, err
	}
}

// errCreatedMeanwhile: the if-absent write of a new manifest lost a race.
var errCreatedMeanwhile = errors.New("the manifest was created meanwhile")

// manifestKey is the backend key of the store's manifest.
func (s *Store) manifestKey() string { return s.c.prefix + ManifestName }

func (s *Store) connectOnce(ctx context.Context, keys Keys, create bool) (*Store, error) {
	key := s.manifestKey()
	sealed, obj, err := s.read(ctx, key, ManifestName)
	switch {
	case err == nil:
		return s.connectExisting(keys, sealed, obj)
	case errors.Is(err, ErrNotFound):
	case errors.Is(err, ErrUnreadable):
		return nil, &ManifestError{Key: key, Err: err}
	default:
		return nil, fmt.Errorf("store: connect: reading the manifest: %w", err)
	}

	// No manifest: a new store, or one older than manifests.
	legacy, err := envelope.New(keys.Identities, keys.Recipients, &envelope.Options{AcceptLegacy: true, Logger: s.c.log})
	if err != nil && len(keys.Identities) > 0 {
		return nil, err
	}
	if !create {
		ss := &storeSealer{readOnly: true, keys: keys, state: &manifestState{}}
		if len(keys.Identities) > 0 {
			ss.env = legacy
		}
		if len(keys.Recovery) > 0 {
			if ss.recov, err = envelope.New(keys.Identities, keys.Recipients, &envelope.Options{AcceptLegacy: true, Recovery: keys.Recovery, Logger: s.c.log}); err != nil {
				return nil, err
			}
		}
		return s.withSealer(ss), nil
	}
	caps, err := backend.ResolveCapabilities(ctx, s.c.b)
	if err != nil {
		return nil, fmt.Errorf("store: connect: %w", err)
	}
	format, err := s.sampleForUpgrade(ctx, legacy)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	m := Manifest{ID: newStoreID(now), Format: format, Created: now, Recipients: legacy.Recipients(), Generation: 1}
	st, err := s.bind(m, keys, &manifestState{})
	if err != nil {
		return nil, err
	}
	if !caps.ConditionalWrites {
		// No if-absent: the manifest is written under the instance lock,
		// by CommitManifest (docs/adr/0021).
		s.c.log.DebugContext(ctx, "store: no manifest yet; it is written once the lock is held", "store_id", m.ID)
		return st, nil
	}
	if err := st.CommitManifest(ctx); err != nil {
		if errors.Is(err, ErrManifestChanged) {
			return nil, errCreatedMeanwhile
		}
		return nil, err
	}
	return st, nil
}

// connectExisting opens the manifest read from storage.
func (s *Store) connectExisting(keys Keys, sealed []byte, obj backend.Object) (*Store, error) {
	key := s.manifestKey()
	hdr, err := envelope.PeekHeader(ManifestName, sealed)
	if err != nil {
		return nil, &ManifestError{Key: key, Err: err}
	}
	if hdr.StoreID.IsZero() {
		return nil, &ManifestError{Key: key, Err: errors.New("it is bound to no store")}
	}
	state := &manifestState{exists: true, version: obj.Version}
	if len(keys.Identities) == 0 {
		// Recovery identities only: an emergency read of the
		// application's objects, bound to the id the header claims.
		recov, err := envelope.New(nil, nil, &envelope.Options{StoreID: hdr.StoreID, AcceptLegacy: true, Recovery: keys.Recovery, Logger: s.c.log})
		if err != nil {
			return nil, err
		}
		return s.withSealer(&storeSealer{readOnly: true, id: hdr.StoreID, recov: recov, keys: keys, state: state}), nil
	}
	open, err := envelope.New(keys.Identities, nil, &envelope.Options{StoreID: hdr.StoreID, Logger: s.c.log})
	if err != nil {
		return nil, err
	}
	plain, err := open.Open(ManifestName, sealed)
	switch {
	case errors.Is(err, envelope.ErrNoIdentity), errors.Is(err, envelope.ErrUnauthenticated):
		e := &NotMemberError{Key: key, StoreID: hdr.StoreID, Recipients: ageRecipients(sealed), Err: err}
		e.Created, _ = StoreIDTime(hdr.StoreID)
		return nil, e
	case err != nil:
		return nil, &ManifestError{Key: key, Err: err}
	}
	m, err := decodeManifest(plain)
	if err != nil {
		return nil, &ManifestError{Key: key, Err: err}
	}
	if m.ID != hdr.StoreID {
		return nil, &ManifestError{Key: key, Err: fmt.Errorf("it records store id %s but is bound to %s", m.ID, hdr.StoreID)}
	}
	state.stored = &m
	return s.bind(m, keys, state)
}

// sampleForUpgrade decides the format of a store that has no manifest:
// FormatBound when it is empty but for the lock's objects; FormatLegacy when one of its first objects
// opens with legacy's identities. It refuses with a *NotMemberError when
// objects exist and none of those tried opens but some say "wrong key", and
// with a *ManifestError when an object is bound to a store (the manifest
// was removed).
func (s *Store) sampleForUpgrade(ctx context.Context, legacy *envelope.Envelope) (int, error) {
	var names []string
	err := s.c.b.List(ctx, s.c.prefix, func(o backend.Object) error {
		name := strings.TrimPrefix(o.Key, s.c.prefix)
		if strings.HasPrefix(name, lockPrefix) {
			// The lock's objects say nothing: without compare-and-swap a
			// new store's first holder writes them, bound to its id,
			// before the manifest (and may crash in between).
			return nil
		}
		names = append(names, name)
		if len(names) == upgradeSample {
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return 0, fmt.Errorf("store: connect: listing the store: %w", err)
	}
	if len(names) == 0 {
		return FormatBound, nil
	}
	var wrong *NotMemberError
	tried := 0
	for _, name := range names {
		if validateName(name, true) != nil {
			continue
		}
		key := s.c.prefix + name
		sealed, _, err := s.read(ctx, key, name)
		switch {
		case errors.Is(err, ErrNotFound), errors.Is(err, ErrUnreadable):
			continue
		case err != nil:
			return 0, fmt.Errorf("store: connect: %w", err)
		}
		hdr, err := envelope.PeekHeader(name, sealed)
		if err != nil {
			continue // not an envelope: nothing to learn from it
		}
		if !hdr.StoreID.IsZero() || name == ManifestName {
			// Bound objects: another process may just have created the
			// store; otherwise its manifest was removed.
			if _, _, err := s.read(ctx, s.manifestKey(), ManifestName); !errors.Is(err, ErrNotFound) {
				return 0, errCreatedMeanwhile
			}
			return 0, &ManifestError{Key: s.manifestKey(), Missing: true, BoundTo: hdr.StoreID}
		}
		tried++
		_, err = legacy.Open(name, sealed)
		switch {
		case err == nil:
			return FormatLegacy, nil
		case errors.Is(err, envelope.ErrNoIdentity), errors.Is(err, envelope.ErrUnauthenticated):
			if wrong == nil {
				wrong = &NotMemberError{Key: key, Recipients: ageRecipients(sealed), Err: err}
			}
		}
	}
	if wrong != nil {
		wrong.Tried = tried
		return 0, wrong
	}
	// Nothing opened and nothing said "wrong key": garbage only.
	s.c.log.WarnContext(ctx, "store: none of the store's first objects is a readable envelope; creating its manifest anyway", "tried", len(names))
	return FormatLegacy, nil
}

// ageRecipients counts the recipient stanzas of a v2 object's age header,
// located by the documented layout (docs/adr/0003: H = 116 + L + 40n);
// 0 when it cannot tell. For messages only: it authenticates nothing.
func ageRecipients(sealed []byte) int {
	if len(sealed) < 84 || sealed[7] != envelope.FormatV2 {
		return 0
	}
	h := 116 + int(binary.BigEndian.Uint16(sealed[10:12])) + 40*int(sealed[9])
	if h >= len(sealed) {
		return 0
	}
	hdr, err := age.ExtractHeader(bytes.NewReader(sealed[h:]))
	if err != nil {
		return 0
	}
	return bytes.Count(hdr, []byte("\n-> "))
}

// bind returns a view of s sealed for manifest m with keys.
func (s *Store) bind(m Manifest, keys Keys, state *manifestState) (*Store, error) {
	rcpts := make([]age.Recipient, 0, len(m.Recipients))
	for _, t := range m.Recipients {
		r, err := envelope.ParseRecipient(t)
		if err != nil {
			return nil, fmt.Errorf("store: connect: the manifest's recipients: %w", err)
		}
		rcpts = append(rcpts, r)
	}
	o := envelope.Options{StoreID: m.ID, ExactRecipients: true, AcceptLegacy: m.Format == FormatLegacy, Logger: s.c.log}
	env, err := envelope.New(keys.Identities, rcpts, &o)
	if err != nil {
		return nil, err
	}
	ss := &storeSealer{m: m, has: true, id: m.ID, env: env, keys: keys, state: state}
	if len(keys.Recovery) > 0 {
		o.Recovery = keys.Recovery
		if ss.recov, err = envelope.New(keys.Identities, rcpts, &o); err != nil {
			return nil, err
		}
	}
	configured, err := configuredRecipients(keys)
	if err != nil {
		return nil, err
	}
	ss.diff = diffRecipients(m.Recipients, configured)
	return s.withSealer(ss), nil
}

// configuredRecipients returns the text forms of the recipients keys name:
// the identities' own and the extra ones.
func configuredRecipients(keys Keys) ([]string, error) {
	if len(keys.Identities) == 0 {
		return nil, nil
	}
	env, err := envelope.New(keys.Identities, keys.Recipients, &envelope.Options{Logger: discardLogger})
	if err != nil {
		return nil, err
	}
	return env.Recipients(), nil
}

// withSealer returns a new store over the same backend and options as s,
// sealing with ss.
func (s *Store) withSealer(ss Sealer) *Store {
	c := *s.c
	c.sealer = ss
	return &Store{c: &c, internal: s.internal, fences: s.fences}
}

// Rebind returns a store sealed for manifest m with keys: the same store
// (m.ID must be its id) moving to another recipient set or format, as a
// rekey does. Nothing is written: [Store.CommitManifest] writes m, and
// until then objects written through the result are sealed to m's set
// while .store still records the old one. It fails if none of keys'
// identities is in m's set (nothing could be written).
func (s *Store) Rebind(m Manifest, keys Keys) (*Store, error) {
	ss, ok := s.c.sealer.(*storeSealer)
	if !ok || ss.id.IsZero() {
		return nil, fmt.Errorf("store: rebind: %w: the store was not connected to a manifest", ErrNoManifest)
	}
	if m.ID != ss.id {
		return nil, fmt.Errorf("store: rebind: manifest of store %s, this store is %s", m.ID, ss.id)
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("store: rebind: %w", err)
	}
	configured, err := configuredRecipients(Keys{Identities: keys.Identities})
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(configured, func(t string) bool { _, in := slices.BinarySearch(m.Recipients, t); return in }) {
		return nil, fmt.Errorf("store: rebind: %w: none of the identities is a recipient of the new set, so none could write", envelope.ErrInvalidIdentity)
	}
	return s.bind(m, keys, ss.state)
}

// CommitManifest writes the manifest the store is bound to, if .store does
// not already hold it: the manifest of a new store on a backend without
// conditional writes (call it while holding the instance lock: the lock is
// what keeps two first opens from creating two stores there), or the one a
// rekey moved to ([Store.Rebind]). Where the backend has conditional
// writes, the write is conditional on .store being as it was read (or
// absent); otherwise .store is read again first. Either way, a .store that
// changed meanwhile fails with [ErrManifestChanged] and nothing is written:
// connect again. A fenced view's fences apply. A store that holds its
// manifest already returns nil at once.
func (s *Store) CommitManifest(ctx context.Context) (err error) {
	ss, ok := s.c.sealer.(*storeSealer)
	if !ok || !ss.has {
		return fmt.Errorf("store: commit manifest: %w", ErrNoManifest)
	}
	st := ss.state
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.exists && st.stored != nil && st.stored.Equal(ss.m) {
		return nil
	}
	if m := s.c.metrics; m != nil {
		defer m.end(ctx, opPut, time.Now(), &err)
	}
	key := s.manifestKey()
	var po PutOptions
	if s.ConditionalWrites() {
		if st.exists {
			po.IfVersion = st.version
		} else {
			po.IfAbsent = true
		}
	} else {
		_, obj, err := s.read(ctx, key, ManifestName)
		switch {
		case errors.Is(err, ErrNotFound):
			if st.exists {
				return fmt.Errorf("store: commit manifest: %s was removed meanwhile: %w", key, ErrManifestChanged)
			}
		case err != nil && !errors.Is(err, ErrUnreadable):
			return fmt.Errorf("store: commit manifest: %w", err)
		case !st.exists || obj.Version != st.version:
			return fmt.Errorf("store: commit manifest: %s was written by another process meanwhile: %w", key, ErrManifestChanged)
		}
	}
	data, err := encodeManifest(ss.m)
	if err != nil {
		return fmt.Errorf("store: commit manifest: %w", err)
	}
	sealed, err := ss.env.Seal(ManifestName, data)
	if err != nil {
		return fmt.Errorf("store: commit manifest: seal: %w", err)
	}
	info, err := s.putSealed(ctx, key, ManifestName, sealed, po)
	if errors.Is(err, ErrPreconditionFailed) {
		return fmt.Errorf("store: commit manifest: %w (%w)", ErrManifestChanged, err)
	}
	if err != nil {
		return fmt.Errorf("store: commit manifest: %w", err)
	}
	m := ss.m
	st.exists, st.version, st.stored = true, info.Version, &m
	s.c.log.InfoContext(ctx, "store: wrote the store's manifest", "store_id", m.ID, "format", m.Format,
		"generation", m.Generation, "recipients", len(m.Recipients))
	return nil
}

// putSealed writes bytes already sealed (by put, or the manifest by
// CommitManifest). Sealing takes time: it looks at the fences again right
// before the request, and sends it under their deadline (the lease's end),
// so that no write of ours lands after another instance could take over.
func (s *Store) putSealed(ctx context.Context, key, name string, sealed []byte, opts PutOptions) (Info, error) {
	if (opts.IfAbsent || opts.IfVersion != "") && !s.ConditionalWrites() {
		return Info{}, fmt.Errorf("store: put %q: conditional write on a backend without compare-and-swap: %w", name, ErrUnsupported)
	}
	ctx, cancel, err := s.fencedContext(ctx, "put", name)
	if err != nil {
		return Info{}, err
	}
	defer cancel()
	obj, err := s.c.b.Put(ctx, key, sealed, backend.PutOptions{IfAbsent: opts.IfAbsent, IfVersion: opts.IfVersion})
	if err != nil {
		return Info{}, s.fenceWrap(ctx, "put", name, err)
	}
	s.c.metrics.moved(ctx, dirWrite, len(sealed))
	return s.info(name, obj), nil
}

// Manifest returns the store's manifest, as read (or made) by [Connect];
// ok is false for a store without one (connected read-only before it had
// one, keyless, recovery-only, or opened with [Open]).
func (s *Store) Manifest() (m Manifest, ok bool) {
	if ss, is := s.c.sealer.(*storeSealer); is && ss.has {
		return ss.m, true
	}
	return Manifest{}, false
}

// RecipientDiff reports how the recipients of the keys the store was
// connected with differ from the store's recipient set (empty without a
// manifest). Writers seal to the store's set whatever the difference:
// reconcile it with a rekey.
func (s *Store) RecipientDiff() RecipientDiff {
	if ss, is := s.c.sealer.(*storeSealer); is {
		return ss.diff
	}
	return RecipientDiff{}
}

// RecipientDiff is how a configuration's recipients differ from a store's.
type RecipientDiff struct {
	// NotSealedTo are configured recipients — the identities' own and the
	// extra ones — that the store does not seal to: nothing written now
	// is sealed to them, and an identity among them only reads.
	NotSealedTo []string
	// NotConfigured are recipients the store seals to that the
	// configuration does not name: everything written is still sealed to
	// them.
	NotConfigured []string
}

// Empty reports whether the configuration and the store agree.
func (d RecipientDiff) Empty() bool { return len(d.NotSealedTo) == 0 && len(d.NotConfigured) == 0 }

// String describes the difference, recipients abbreviated.
func (d RecipientDiff) String() string {
	short := func(ts []string) string {
		out := make([]string, len(ts))
		for i, t := range ts {
			out[i] = shortRecipient(t)
		}
		return strings.Join(out, ", ")
	}
	var parts []string
	if len(d.NotSealedTo) > 0 {
		parts = append(parts, "configured but not recipients of the store: "+short(d.NotSealedTo))
	}
	if len(d.NotConfigured) > 0 {
		parts = append(parts, "recipients of the store not configured here: "+short(d.NotConfigured))
	}
	return strings.Join(parts, "; ")
}

func diffRecipients(store, configured []string) RecipientDiff {
	var d RecipientDiff
	for _, t := range sortedUnique(configured) {
		if _, in := slices.BinarySearch(store, t); !in {
			d.NotSealedTo = append(d.NotSealedTo, t)
		}
	}
	conf := sortedUnique(configured)
	for _, t := range store {
		if _, in := slices.BinarySearch(conf, t); !in {
			d.NotConfigured = append(d.NotConfigured, t)
		}
	}
	return d
}

// manifestState is what views and rebinds of one connection know about
// .store as it is in storage.
type manifestState struct {
	mu      sync.Mutex
	exists  bool      // .store exists (as far as this connection knows)
	version string    // its backend version, when it exists
	stored  *Manifest // its content, when this connection could read it
}

// errNoKey means an object was to be opened or sealed by a store
// connected without identities.
var errNoKey = errors.New("no identity configured")

// storeSealer is the Sealer of a connected store: one envelope bound to
// the store's id and sealing to its recipient set, and, when recovery
// identities are given, a second one that also opens through them, used
// only for the application's objects.
type storeSealer struct {
	m        Manifest
	has      bool             // m is the store's manifest
	id       envelope.StoreID // the store's id (also known, unauthenticated, for a recovery-only store)
	env      *envelope.Envelope
	recov    *envelope.Envelope
	readOnly bool
	keys     Keys
	diff     RecipientDiff
	state    *manifestState
}

// reserved reports cairn-state's own names, which never open through a
// recovery identity.
func reserved(name string) bool { return strings.HasPrefix(name, ".") }

func (ss *storeSealer) Seal(name string, plaintext []byte) ([]byte, error) {
	switch {
	case ss.readOnly:
		return nil, fmt.Errorf("seal %q: %w", name, ErrNoManifest)
	case ss.env == nil:
		return nil, fmt.Errorf("seal %q: %w", name, errNoKey)
	case name == ManifestName:
		return nil, fmt.Errorf("seal %q: the manifest is written only by Connect and CommitManifest", name)
	}
	return ss.env.Seal(name, plaintext)
}

func (ss *storeSealer) Open(name string, sealed []byte) ([]byte, error) {
	pt, _, err := ss.openWithInfo(name, sealed)
	return pt, err
}

// openWithInfo opens through the recovery envelope for the application's
// objects when there is one, through the main one otherwise.
func (ss *storeSealer) openWithInfo(name string, sealed []byte) ([]byte, envelope.Opened, error) {
	if ss.recov != nil && !reserved(name) {
		return ss.recov.OpenWithInfo(name, sealed)
	}
	if ss.env == nil {
		if ss.recov != nil {
			return nil, envelope.Opened{}, fmt.Errorf("open %q: %w: reserved objects never open through a recovery identity", name, envelope.ErrUnauthenticated)
		}
		return nil, envelope.Opened{}, fmt.Errorf("open %q: %w", name, errNoKey)
	}
	return ss.env.OpenWithInfo(name, sealed)
}

// discardLogger swallows the records of envelopes made only to learn a
// recipient set.
var discardLogger = slog.New(slog.DiscardHandler)

// ManifestWritten reports whether .store holds the manifest the store is
// bound to. It is false for a new store on a backend without conditional
// writes until [Store.CommitManifest] has written it, for a rebound store
// until its commit, and for a store without a manifest.
func (s *Store) ManifestWritten() bool {
	ss, ok := s.c.sealer.(*storeSealer)
	if !ok || !ss.has {
		return false
	}
	ss.state.mu.Lock()
	defer ss.state.mu.Unlock()
	return ss.state.exists && ss.state.stored != nil && ss.state.stored.Equal(ss.m)
}
