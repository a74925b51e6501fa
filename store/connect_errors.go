package store

import (
	"errors"

	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/storemeta"
)

// The errors of a store's identity (docs/adr/0021).
var (
	// ErrNotMember means the configured identities do not belong to the
	// store: none of them opens its manifest (.cairn-state/.store).
	// Nothing was written and the lock was not touched. The error names
	// the store's id, its creation time and how many recipients it is
	// sealed to (read without a key, so not authenticated), and wraps the
	// envelope's reason.
	ErrNotMember = storemeta.ErrNotMember

	// ErrWrongStore means the store is not the one the caller pinned
	// (ConnectOptions.StoreID): its manifest names another store id.
	// Nothing was opened, written or locked. The error names both ids.
	ErrWrongStore = storemeta.ErrWrongStore

	// ErrBadManifest means the store's manifest exists but is not one:
	// garbage, tampered, or a record this version cannot read. Connect
	// neither re-creates nor overwrites it. The error wraps what is
	// wrong.
	ErrBadManifest = storemeta.ErrBadManifest

	// ErrManifestMissing means the store's manifest does not exist while
	// other objects do under .cairn-state/: it was removed. Connect
	// refuses on every path, read-only ones included, and never creates a
	// store there. The error names one of the objects found.
	ErrManifestMissing = storemeta.ErrManifestMissing

	// ErrNoStore means there is no store at the location: nothing under
	// .cairn-state/ (the lock's objects aside). A connection that may not
	// create one (read-only, or pinned to a store id) fails with it,
	// creating nothing. The error names the location.
	ErrNoStore = storemeta.ErrNoStore

	// ErrStoreExists means a connection that was to create a new store
	// (ConnectOptions.New) found one there. The error names the store
	// found.
	ErrStoreExists = storemeta.ErrStoreExists

	// ErrRolledBack means an object was sealed under a newer generation
	// of the store's manifest than the manifest read: the manifest was
	// put back from an older copy. The error names the object and both
	// generations.
	ErrRolledBack = storemeta.ErrRolledBack

	// ErrUnlistedRecipient means the store's recipient set holds a
	// recipient the configuration does not list, and the connection asked
	// for none (ConnectOptions.RequireConfiguredRecipients). Nothing was
	// written and the lock was not touched.
	ErrUnlistedRecipient = errors.New("the store is sealed to a recipient the configuration does not list")

	// ErrInvalidIdentity means a configured identity cannot be used: a
	// nil or zero one, an empty passphrase, a work factor too low, an
	// identity given both as an identity and a recovery identity. Nothing
	// was read or written.
	ErrInvalidIdentity = envelope.ErrInvalidIdentity

	// ErrInvalidRecipient means a configured recipient cannot be used: a
	// nil one, a passphrase recipient without its identity, post-quantum
	// and classic recipients mixed. Nothing was read or written.
	ErrInvalidRecipient = envelope.ErrInvalidRecipient

	// ErrNoManifest means a write through a store that was connected
	// without a manifest to write with: keyless, or with recovery
	// identities only. Such a store is read-only.
	ErrNoManifest = errors.New("the store was connected without its manifest and is read-only")

	// ErrManifestChanged means a manifest write found .store changed since
	// it was read (another process created or re-keyed the store
	// meanwhile): nothing was written. Connect again.
	ErrManifestChanged = errors.New("the store's manifest changed since it was read")
)
