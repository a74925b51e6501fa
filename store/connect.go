package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"filippo.io/age"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/driver"
	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/storehook"
	"github.com/cairnhq/state/internal/storemeta"
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
	// set (a rekey reconciles them): writers seal to the store's set.
	Recipients []age.Recipient
	// Recovery identities may open the application's objects (names not
	// starting with '.') that no identity authenticates: an emergency
	// opt-in (envelope.Options.Recovery); such objects may be forged. The
	// store never opens its reserved objects — the manifest, the lock's,
	// the migration log, rekey progress — with them.
	Recovery []age.Identity
}

// ConnectOptions configure [Connect]. The zero value means a connection
// to an existing store with the store's default options.
type ConnectOptions struct {
	// Options are the store's options (Root, MaxObjectSize, …).
	Options
	// Create lets the connection create a store where there is none: only
	// where nothing is under .cairn-state/ (the lock's own objects
	// aside). Where the backend has
	// conditional writes the new manifest is written at once, if absent;
	// otherwise state.Open (or `cairn-state init`) writes it once it holds
	// the instance lock. Without Create, a location without a store fails
	// with [ErrNoStore]. It needs an identity.
	Create bool
	// New makes the connection create a new store and nothing else (it
	// implies Create): a store already at the location, or created there
	// by another process first, fails with [ErrStoreExists]. For
	// `cairn-state init`.
	New bool
	// StoreID, when not empty, pins the store: its id as [Store.StoreID]
	// gives it, 32 hexadecimal digits. A manifest that names another
	// store id fails with [ErrWrongStore] before anything else is read,
	// opened or written, and no store is created (a location without one
	// fails with [ErrNoStore]). An id that is not one fails Connect,
	// touching nothing.
	StoreID string
	// RequireConfiguredRecipients refuses, with [ErrUnlistedRecipient], a
	// store whose recipient set holds a recipient that Keys do not name
	// (their identities' recipients and the extra ones): what a manifest
	// put back from before a rekey that removed a recipient looks like,
	// caught before any object is read.
	RequireConfiguredRecipients bool
	// Location names the store in errors and in the warning logged when a
	// store is created: its URL without credentials, say. Empty means its
	// key prefix.
	Location string
}

// lockPrefix starts the names of the lock's objects (lock's listPrefix;
// the store cannot import the lock).
const lockPrefix = ".lock"

// Connect opens the store of b as the holder of keys, checking first that
// the keys belong to it: it reads the store's manifest,
// <root>/.cairn-state/.store, before anything else, and returns a store
// whose objects are bound to the store's id, sealed to its recipient set
// and stamped with its generation (docs/adr/0021, 0031). The backend is
// told the capabilities the manifest records (driver.AdoptCapabilities),
// so the storage is not probed again. It never touches the lock.
//
// Errors: [ErrWrongStore] for a store other than opts.StoreID;
// [ErrNotMember] when no identity opens the manifest — nothing is
// written; [ErrBadManifest] when the manifest is garbage or tampered, or
// [ErrManifestMissing] when it is missing while other objects are there —
// it is neither re-created nor overwritten; [ErrNoStore] where there is no
// store and none may be created;
// [ErrUnlistedRecipient]; backend.ErrCapabilityMismatch when the backend
// is configured for another lock mode than the store's; the backend's
// error when the storage fails; [ErrInvalidIdentity] and
// [ErrInvalidRecipient] for unusable keys.
//
// With no identity and no recovery identity, the store is keyless: it
// lists and describes objects but opens and writes none; its id is the one
// the manifest's header carries (not authenticated). With recovery
// identities only, it is an emergency read-only store bound to that id:
// the application's objects open through the recovery identities, the
// reserved ones do not.
func Connect(ctx context.Context, b backend.Backend, keys Keys, o ConnectOptions) (*Store, error) {
	base, err := openStore(b, &storeSealer{readOnly: true, state: &manifestState{}}, o.Options)
	if err != nil {
		return nil, err
	}
	if o.Location == "" {
		o.Location = base.c.prefix
	}
	o.Create = o.Create || o.New
	base.c.location = o.Location
	if o.Create && len(keys.Identities) == 0 {
		return nil, fmt.Errorf("store: connect: %w: creating a store needs an identity", errNoKey)
	}
	var pin envelope.StoreID
	if o.StoreID != "" {
		if pin, err = envelope.ParseStoreID(o.StoreID); err != nil {
			return nil, fmt.Errorf("store: connect: ConnectOptions.StoreID: %w", err)
		}
	}
	for attempt := 1; ; attempt++ {
		st, err := base.connectOnce(ctx, keys, &o, pin)
		if errors.Is(err, errCreatedMeanwhile) && attempt < 4 {
			continue // another process created the manifest first: read theirs
		}
		return st, err
	}
}

// errCreatedMeanwhile: the manifest appeared while the connection looked
// for it, or the if-absent write of a new one lost a race.
var errCreatedMeanwhile = errors.New("the manifest was created meanwhile")

// manifestKey is the backend key of the store's manifest.
func (s *Store) manifestKey() string { return s.c.prefix + storemeta.ManifestName }

func (s *Store) connectOnce(ctx context.Context, keys Keys, o *ConnectOptions, pin envelope.StoreID) (*Store, error) {
	key := s.manifestKey()
	sealed, obj, err := s.read(ctx, key, storemeta.ManifestName)
	switch {
	case err == nil:
		return s.connectExisting(ctx, keys, o, pin, sealed, obj)
	case errors.Is(err, ErrNotFound):
	case errors.Is(err, ErrUnreadable):
		return nil, &storemeta.ManifestError{Key: key, Location: o.Location, Err: err}
	default:
		return nil, fmt.Errorf("store: connect: reading the manifest: %w", err)
	}
	// No manifest: an empty location, or a store whose manifest was
	// removed. Nothing is ever created where objects are.
	if err := s.checkEmpty(ctx, o.Location); err != nil {
		return nil, err
	}
	if !o.Create || !pin.IsZero() {
		return nil, &storemeta.NoStoreError{Location: o.Location, Pinned: pin}
	}
	return s.create(ctx, keys)
}

// checkEmpty fails with a *storemeta.ManifestError (ErrManifestMissing) when
// objects other than the lock's are under the store's prefix while its
// manifest is not: the manifest was removed. The lock's objects say
// nothing: on a backend without conditional writes a new store's first
// holder writes them, bound to its id, before its manifest (and may crash
// in between). A manifest found by the listing was created meanwhile.
func (s *Store) checkEmpty(ctx context.Context, location string) error {
	found := ""
	err := s.c.b.List(ctx, s.c.prefix, func(o backend.Object) error {
		if name := strings.TrimPrefix(o.Key, s.c.prefix); !strings.HasPrefix(name, lockPrefix) {
			found = name
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return fmt.Errorf("store: connect: listing the store: %w", err)
	}
	switch found {
	case "":
		return nil
	case storemeta.ManifestName:
		return errCreatedMeanwhile
	}
	return &storemeta.ManifestError{Key: s.manifestKey(), Location: location, Missing: true, Found: fmt.Sprintf("%q", found)}
}

// create makes a new store: a manifest with a fresh id, the configured
// recipients, and the lock mode the storage's capabilities imply. Where
// the backend has conditional writes the manifest is written at once, if
// absent; otherwise it is pending until CommitManifest.
func (s *Store) create(ctx context.Context, keys Keys) (*Store, error) {
	env, err := envelope.New(keys.Identities, keys.Recipients, envelope.Options{Logger: discardLogger})
	if err != nil {
		return nil, err
	}
	caps, err := driver.ResolveCapabilities(ctx, s.c.b)
	if err != nil {
		return nil, fmt.Errorf("store: connect: %w", err)
	}
	m := storemeta.Manifest{Generation: 1, Recipients: env.Recipients(), LockMode: storemeta.LockModeClaims, Storage: caps.Evidence, CopySourceConditions: caps.CopySourceConditions}
	if caps.ConditionalWrites {
		m.LockMode = storemeta.LockModeCAS
	}
	if m.Storage == "" {
		m.Storage = fmt.Sprintf("the backend's fixed capabilities (conditional writes: %t)", caps.ConditionalWrites)
	}
	m.Created = time.Now().UTC().Truncate(time.Millisecond)
	m.ID = newStoreID(m.Created)
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
	if err := st.commitManifest(ctx); err != nil {
		if errors.Is(err, ErrManifestChanged) {
			return nil, errCreatedMeanwhile
		}
		return nil, err
	}
	return st, nil
}

// connectExisting opens the manifest read from storage.
func (s *Store) connectExisting(ctx context.Context, keys Keys, o *ConnectOptions, pin envelope.StoreID, sealed []byte, obj backend.Object) (*Store, error) {
	key := s.manifestKey()
	bad := func(err error) error { return &storemeta.ManifestError{Key: key, Location: o.Location, Err: err} }
	hdr, err := envelope.PeekHeader(storemeta.ManifestName, sealed)
	if err != nil {
		return nil, bad(err)
	}
	if hdr.StoreID.IsZero() {
		return nil, bad(errors.New("it is bound to no store"))
	}
	if !pin.IsZero() && hdr.StoreID != pin {
		e := &storemeta.WrongStoreError{Key: key, Location: o.Location, Pinned: pin, Found: hdr.StoreID}
		e.Created, _ = storeIDTime(hdr.StoreID)
		return nil, e
	}
	if o.New {
		return nil, &storemeta.StoreExistsError{Location: o.Location, Found: hdr.StoreID}
	}
	state := &manifestState{exists: true, version: obj.Version}
	if len(keys.Identities) == 0 {
		// Keyless, or recovery identities only: an emergency read of the
		// application's objects, bound to the id the header claims.
		ss := &storeSealer{readOnly: true, id: hdr.StoreID, keys: keys, state: state}
		if len(keys.Recovery) > 0 {
			if ss.recov, err = envelope.New(nil, nil, envelope.Options{StoreID: hdr.StoreID, Recovery: keys.Recovery, Logger: s.c.log}); err != nil {
				return nil, err
			}
		}
		return s.withSealer(ss), nil
	}
	open, err := envelope.New(keys.Identities, nil, envelope.Options{StoreID: hdr.StoreID, Logger: s.c.log})
	if err != nil {
		return nil, err
	}
	plain, err := open.Open(storemeta.ManifestName, sealed)
	switch {
	case errors.Is(err, envelope.ErrNoMatchingIdentity), errors.Is(err, envelope.ErrUnauthenticated):
		e := &storemeta.NotMemberError{Key: key, StoreID: hdr.StoreID, Recipients: hdr.AgeRecipients, Err: err}
		e.Created, _ = storeIDTime(hdr.StoreID)
		return nil, e
	case err != nil:
		return nil, bad(err)
	}
	m, err := decodeManifest(plain)
	switch {
	case err != nil:
		return nil, bad(err)
	case m.ID != hdr.StoreID:
		return nil, bad(fmt.Errorf("it records store id %s but is bound to %s", m.ID, hdr.StoreID))
	case hdr.Stamp.Generation != m.Generation:
		return nil, bad(fmt.Errorf("it records generation %d but was sealed under generation %d", m.Generation, hdr.Stamp.Generation))
	}
	recorded := backend.Capabilities{ConditionalWrites: m.ConditionalWrites(), CopySourceConditions: m.CopySourceConditions, Evidence: m.Storage}
	if err := driver.AdoptCapabilities(ctx, s.c.b, recorded); err != nil {
		return nil, fmt.Errorf("store: connect: %s records lock mode %s (decided at its creation from: %s): %w", o.Location, m.LockMode, m.Storage, err)
	}
	state.stored = &m
	st, err := s.bind(m, keys, state)
	if err != nil {
		return nil, err
	}
	if d := st.recipientDiff(); o.RequireConfiguredRecipients && len(d.NotConfigured) > 0 {
		return nil, fmt.Errorf("store: connect: %w: %s (store %s, generation %d); nothing was read or written. "+
			"If the store's set is right, add the recipient to the configuration; if it is not, the manifest may have been put back from before a rekey: restore the newest one",
			ErrUnlistedRecipient, d, m.ID, m.Generation)
	}
	return st, nil
}

// bind returns a view of s sealed for manifest m with keys.
func (s *Store) bind(m storemeta.Manifest, keys Keys, state *manifestState) (*Store, error) {
	rcpts := make([]age.Recipient, 0, len(m.Recipients))
	for _, t := range m.Recipients {
		r, err := envelope.ParseRecipient(t)
		if err != nil {
			return nil, fmt.Errorf("store: connect: the manifest's recipients: %w", err)
		}
		rcpts = append(rcpts, r)
	}
	o := envelope.Options{StoreID: m.ID, ExactRecipients: true, Logger: s.c.log}
	env, err := envelope.New(keys.Identities, rcpts, o)
	if err != nil {
		return nil, err
	}
	ss := &storeSealer{m: m, has: true, id: m.ID, env: env, keys: keys, state: state}
	if len(keys.Recovery) > 0 {
		o.Recovery = keys.Recovery
		if ss.recov, err = envelope.New(keys.Identities, rcpts, o); err != nil {
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
	env, err := envelope.New(keys.Identities, keys.Recipients, envelope.Options{Logger: discardLogger})
	if err != nil {
		return nil, err
	}
	return env.Recipients(), nil
}

// withSealer returns a new store over the same backend and options as s,
// sealing with ss.
func (s *Store) withSealer(ss storehook.Sealer) *Store {
	c := *s.c
	c.sealer = ss
	return &Store{c: &c, internal: s.internal, fences: s.fences}
}

// rebind returns a store sealed for manifest m with keys: the same store
// (m.ID must be its id) moving to another recipient set and generation, as
// a rekey does. Nothing is written: storeadmin.CommitManifest writes m, and
// until then objects written through the result are sealed to m's set and
// stamped with m's generation while .store still records the old ones. It
// fails if none of keys' identities is in m's set (nothing could be
// written).
func (s *Store) rebind(m storemeta.Manifest, keys Keys) (*Store, error) {
	ss, ok := s.c.sealer.(*storeSealer)
	if !ok || ss.id.IsZero() {
		return nil, fmt.Errorf("store: rebind: %w: the store was not connected to a manifest", ErrNoManifest)
	}
	if m.ID != ss.id {
		return nil, fmt.Errorf("store: rebind: manifest of store %s, this store is %s", m.ID, ss.id)
	}
	if err := m.Validate(); err != nil {
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

// commitManifest writes the manifest the store is bound to, if .store does
// not already hold it: the manifest of a new store on a backend without
// conditional writes (call it while holding the instance lock: the lock is
// what keeps two first opens from creating two stores there), or the one a
// rekey moved to (storeadmin.Rebind). Where the backend has conditional
// writes, the write is conditional on .store being as it was read (or
// absent); otherwise .store is read again first. Either way, a .store that
// changed meanwhile fails with [ErrManifestChanged] and nothing is written:
// connect again. A fenced view's fences apply. A store that holds its
// manifest already returns nil at once.
func (s *Store) commitManifest(ctx context.Context) error {
	ss, ok := s.c.sealer.(*storeSealer)
	if !ok || !ss.has {
		return fmt.Errorf("store: commit manifest: %w", ErrNoManifest)
	}
	ss.state.mu.Lock()
	defer ss.state.mu.Unlock()
	if err := s.writeManifest(ctx, ss, ss.manifest()); err != nil {
		return fmt.Errorf("store: commit manifest: %w", err)
	}
	return nil
}

// recordMigrationLog records in the store's manifest that the migration
// log exists (Manifest.MigrationLog), one generation up, so that a log
// deleted from then on is refused rather than taken for a fresh store
// (docs/adr/0033). The migrate package calls it, through the store
// fenced by the lock it holds, once the log is written. The write is
// commitManifest's: conditional on .store as it was read, or read again
// first where the backend has no conditions; a .store that changed fails
// with [ErrManifestChanged]. A manifest that says so already, or a store
// without one (opened with storeadmin.Open), returns nil at once.
func (s *Store) recordMigrationLog(ctx context.Context) error {
	ss, ok := s.c.sealer.(*storeSealer)
	if !ok || !ss.has {
		return nil
	}
	ss.state.mu.Lock()
	defer ss.state.mu.Unlock()
	next := ss.manifest()
	if next.MigrationLog {
		return nil
	}
	next.MigrationLog = true
	next.Generation++
	if err := s.writeManifest(ctx, ss, next); err != nil {
		return fmt.Errorf("store: recording the migration log in the manifest: %w", err)
	}
	ss.mu.Lock()
	ss.m = next
	ss.mu.Unlock()
	return nil
}

// writeManifest writes m as .store, conditional on .store being as this
// connection knows it; the caller holds ss.state.mu. It does nothing when
// .store already holds m.
func (s *Store) writeManifest(ctx context.Context, ss *storeSealer, m storemeta.Manifest) (err error) {
	st := ss.state
	if st.exists && st.stored != nil && st.stored.Equal(m) {
		return nil
	}
	if mt := s.c.metrics; mt != nil {
		defer mt.end(ctx, opPut, time.Now(), &err)
	}
	key := s.manifestKey()
	var po PutOptions
	if s.conditionalWrites() {
		if st.exists {
			po.IfVersion = st.version
		} else {
			po.IfAbsent = true
		}
	} else {
		_, obj, err := s.read(ctx, key, storemeta.ManifestName)
		switch {
		case errors.Is(err, ErrNotFound):
			if st.exists {
				return fmt.Errorf("%s was removed meanwhile: %w", key, ErrManifestChanged)
			}
		case err != nil && !errors.Is(err, ErrUnreadable):
			return err
		case !st.exists || obj.Version != st.version:
			return fmt.Errorf("%s was written by another process meanwhile: %w", key, ErrManifestChanged)
		}
	}
	data, err := encodeManifest(m)
	if err != nil {
		return err
	}
	sealed, _, err := s.sealWith(ss, storemeta.ManifestName, data, m.Generation)
	if err != nil {
		return fmt.Errorf("seal: %w", err)
	}
	info, err := s.putSealed(ctx, key, storemeta.ManifestName, sealed, po)
	if errors.Is(err, ErrPreconditionFailed) {
		return fmt.Errorf("%w (%w)", ErrManifestChanged, err)
	}
	if err != nil {
		return err
	}
	created := !st.exists
	st.exists, st.version, st.stored = true, info.Version, &m
	if created {
		s.c.log.WarnContext(ctx, "store: created a new store; to refuse any other store at this location from now on, "+
			"pin its id (state.Config.StoreID, cairn-state --store-id, CAIRN_STATE_STORE_ID)",
			"store_id", m.ID, "location", s.c.location, "lock_mode", m.LockMode, "recipients", len(m.Recipients))
		return nil
	}
	s.c.log.InfoContext(ctx, "store: wrote the store's manifest", "store_id", m.ID,
		"generation", m.Generation, "recipients", len(m.Recipients), "migration_log", m.MigrationLog)
	return nil
}

// seal seals data for name: through a connected store, stamped with the
// manifest's generation and, through a fenced view, with the fence's epoch
// and the next number of its write sequence (docs/adr/0030).
func (s *Store) seal(name string, data []byte) ([]byte, envelope.Stamp, error) {
	ss, ok := s.c.sealer.(*storeSealer)
	if !ok {
		sealed, err := s.c.sealer.Seal(name, data)
		return sealed, envelope.Stamp{}, err
	}
	if name == storemeta.ManifestName {
		return nil, envelope.Stamp{}, fmt.Errorf("seal %q: the manifest is written only by Connect, CommitManifest and RecordMigrationLog", name)
	}
	return s.sealWith(ss, name, data, ss.generation())
}

// sealWith seals with ss under generation gen, stamped by the view's
// last fence.
func (s *Store) sealWith(ss *storeSealer, name string, data []byte, gen uint64) ([]byte, envelope.Stamp, error) {
	switch {
	case ss.readOnly:
		return nil, envelope.Stamp{}, fmt.Errorf("seal %q: %w", name, ErrNoManifest)
	case ss.env == nil:
		return nil, envelope.Stamp{}, fmt.Errorf("seal %q: %w", name, errNoKey)
	}
	stamp := s.stamp(gen)
	sealed, err := ss.env.SealStamped(name, data, stamp, s.writerFor(stamp.Epoch))
	return sealed, stamp, err
}

// stamp is the stamp of a write sealed now under generation gen: the
// view's last fence's epoch and its next write sequence number.
func (s *Store) stamp(gen uint64) envelope.Stamp {
	stamp := envelope.Stamp{Generation: gen}
	if n := len(s.fences); n > 0 {
		stamp.Epoch, stamp.Sequence = s.fences[n-1].NextWrite()
	}
	return stamp
}

// putSealed writes bytes already sealed (by put, or the manifest by
// CommitManifest). Sealing takes time: it looks at the fences again right
// before the request, and sends it under their deadline (the lease's end),
// so that no write of ours lands after another instance could take over.
func (s *Store) putSealed(ctx context.Context, key, name string, sealed []byte, opts PutOptions) (Info, error) {
	if (opts.IfAbsent || opts.IfVersion != "") && !s.conditionalWrites() {
		return Info{}, fmt.Errorf("store: put %q: conditional write on a backend without compare-and-swap: %w", name, ErrUnsupported)
	}
	obj, err := s.send(ctx, write{op: "put", key: key, name: name, sealed: sealed, put: opts})
	if err != nil {
		return Info{}, err
	}
	s.c.metrics.moved(ctx, dirWrite, len(sealed))
	return s.info(name, obj), nil
}

// manifest returns the store's manifest, as read (or made) by [Connect]
// and since rewritten through this connection; ok is false for a store
// without one (keyless, recovery-only, or opened with storeadmin.Open).
func (s *Store) manifest() (m storemeta.Manifest, ok bool) {
	if ss, is := s.c.sealer.(*storeSealer); is && ss.has {
		return ss.manifest(), true
	}
	return storemeta.Manifest{}, false
}

// recipientDiff reports how the recipients of the keys the store was
// connected with differ from the store's recipient set (empty without a
// manifest). Writers seal to the store's set whatever the difference:
// reconcile it with a rekey.
func (s *Store) recipientDiff() storemeta.RecipientDiff {
	if ss, is := s.c.sealer.(*storeSealer); is {
		return ss.diff
	}
	return storemeta.RecipientDiff{}
}

func diffRecipients(store, configured []string) storemeta.RecipientDiff {
	var d storemeta.RecipientDiff
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
	exists  bool                // .store exists (as far as this connection knows)
	version string              // its backend version, when it exists
	stored  *storemeta.Manifest // its content, when this connection could read it
}

// errNoKey means an object was to be opened or sealed by a store
// connected without identities.
var errNoKey = errors.New("no identity configured")

// storeSealer is the Sealer of a connected store: one envelope bound to
// the store's id and sealing to its recipient set, and, when recovery
// identities are given, a second one that also opens through them, used
// only for the application's objects.
type storeSealer struct {
	mu       sync.Mutex
	m        storemeta.Manifest // the manifest the store is bound to; its generation stamps what is sealed
	has      bool               // m is the store's manifest
	id       envelope.StoreID   // the store's id (also known, unauthenticated, for a keyless or recovery-only store)
	env      *envelope.Envelope
	recov    *envelope.Envelope
	readOnly bool
	keys     Keys
	diff     storemeta.RecipientDiff
	state    *manifestState
}

func (ss *storeSealer) manifest() storemeta.Manifest {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.m
}

func (ss *storeSealer) generation() uint64 { return ss.manifest().Generation }

// reserved reports cairn-state's own names, which never open through a
// recovery identity.
func reserved(name string) bool { return strings.HasPrefix(name, ".") }

// Seal implements Sealer; a connected store never calls it: it seals
// through [Store.seal], which stamps what it seals.
func (ss *storeSealer) Seal(name string, plaintext []byte) ([]byte, error) {
	return nil, fmt.Errorf("seal %q: a connected store seals through its views", name)
}

func (ss *storeSealer) Open(name string, sealed []byte) ([]byte, error) {
	pt, _, err := ss.openWithInfo(name, sealed)
	return pt, err
}

// openWithInfo opens through the recovery envelope for the application's
// objects when there is one, through the main one otherwise, and refuses
// an object sealed under a newer generation than the manifest's: the
// manifest was rolled back.
func (ss *storeSealer) openWithInfo(name string, sealed []byte) ([]byte, envelope.Opened, error) {
	env, err := ss.opener(name)
	if err != nil {
		return nil, envelope.Opened{}, err
	}
	pt, opened, err := env.OpenWithInfo(name, sealed)
	if err == nil {
		err = ss.checkStamp(name, opened)
	}
	if err != nil {
		return nil, envelope.Opened{}, err
	}
	return pt, opened, nil
}

// opener is the envelope that opens name: the recovery envelope for the
// application's objects when there is one, the main one otherwise.
func (ss *storeSealer) opener(name string) (*envelope.Envelope, error) {
	switch {
	case ss.recov != nil && !reserved(name):
		return ss.recov, nil
	case ss.env != nil:
		return ss.env, nil
	case ss.recov != nil:
		return nil, fmt.Errorf("open %q: %w: reserved objects never open through a recovery identity", name, envelope.ErrUnauthenticated)
	default:
		return nil, fmt.Errorf("open %q: %w", name, errNoKey)
	}
}

// checkStamp refuses an object sealed under a newer generation than the
// manifest's: the manifest was rolled back.
func (ss *storeSealer) checkStamp(name string, opened envelope.Opened) error {
	if gen := ss.generation(); ss.has && opened.Stamp.Generation > gen {
		return &storemeta.RolledBackError{Name: name, Object: opened.Stamp.Generation, Manifest: gen}
	}
	return nil
}

// discardLogger swallows the records of envelopes made only to learn a
// recipient set.
var discardLogger = slog.New(slog.DiscardHandler)

// manifestWritten reports whether .store holds the manifest the store is
// bound to. It is false for a new store on a backend without conditional
// writes until storeadmin.CommitManifest has written it, for a rebound store
// until its commit, and for a store without a manifest.
func (s *Store) manifestWritten() bool {
	ss, ok := s.c.sealer.(*storeSealer)
	if !ok || !ss.has {
		return false
	}
	m := ss.manifest()
	ss.state.mu.Lock()
	defer ss.state.mu.Unlock()
	return ss.state.exists && ss.state.stored != nil && ss.state.stored.Equal(m)
}
