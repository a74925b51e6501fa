package store

import (
	"errors"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/storemeta"
)

// The store's errors. Every error the store returns names the state object
// it concerns and wraps one of these (or a backend or envelope sentinel), so
// callers test them with errors.Is.
var (
	// ErrNotFound means the state object does not exist. It is
	// backend.ErrNotFound, so either name works with errors.Is.
	ErrNotFound = backend.ErrNotFound
	// ErrPreconditionFailed means a conditional Put or Delete found the
	// object in another state than the condition asked for. It is
	// backend.ErrPreconditionFailed.
	ErrPreconditionFailed = backend.ErrPreconditionFailed
	// ErrUnsupported means a condition was asked of a backend without
	// conditional writes; nothing was written. It is backend.ErrUnsupported.
	ErrUnsupported = backend.ErrUnsupported

	// ErrInvalidName means a state name was refused before any storage was
	// touched; the error says why (see [MaxNameLen] and the package doc
	// for what a name may be).
	ErrInvalidName = storemeta.ErrInvalidName
	// ErrReservedName means a name starting with '.' was used through a
	// view other than cairn-state's own. Such errors also match
	// ErrInvalidName.
	ErrReservedName = storemeta.ErrReservedName
	// ErrInvalidRoot means Options.Root is not a usable root prefix.
	ErrInvalidRoot = errors.New("invalid root prefix")
	// ErrUnreadable means the object exists but cannot be opened: it is
	// sealed to keys this store's sealer does not hold, tampered, not an
	// envelope, corrupt in storage (backend.ErrCorrupt), or larger than the
	// maximum object size. The error also wraps the cause (an envelope
	// sentinel, backend.ErrCorrupt, ErrTooLarge). Storage that fails to
	// answer is never ErrUnreadable.
	ErrUnreadable = errors.New("object cannot be opened")
	// ErrTooLarge means an object is larger than the store's maximum
	// object size, on write (nothing was written) or on read (the object
	// was not read into memory).
	ErrTooLarge = errors.New("object larger than the store's maximum object size")
	// ErrFenced means a write was refused because the store's fence (the
	// instance lock) reports that this process may no longer write. The
	// error also wraps the fence's own error, e.g. the lock's ErrLost.
	ErrFenced = errors.New("write refused: this instance no longer holds the state lock")
	// ErrConflict means Update gave up after its bounded number of
	// attempts because other writers kept changing the object. It also
	// matches ErrPreconditionFailed.
	ErrConflict = errors.New("update conflict: the object kept changing under concurrent writers")
	// ErrBadJSON means a stored value is not a document written by
	// [PutJSON], or does not decode into the requested type.
	ErrBadJSON = errors.New("not a valid JSON state document")
	// ErrReservedKey is returned by the [Guard] wrapper for any operation
	// on a key under the reserved state prefix.
	ErrReservedKey = errors.New("key is under the reserved state prefix and belongs to cairn-state")
)
