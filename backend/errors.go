package backend

import "errors"

var (
	// ErrNotFound means the object does not exist.
	ErrNotFound = errors.New("object not found")
	// ErrPreconditionFailed means a conditional write or delete found the
	// object in another state than the condition asked for.
	ErrPreconditionFailed = errors.New("precondition failed")
	// ErrUnsupported means the backend cannot perform the operation as
	// asked, for example a conditional write on storage without
	// compare-and-swap. Nothing was written.
	ErrUnsupported = errors.New("operation not supported by this backend")
	// ErrInvalidKey means a key was refused before any storage was touched.
	ErrInvalidKey = errors.New("invalid key")
	// ErrPermission means the storage refused the operation to these
	// credentials or this process — access denied, a read-only file
	// system — so that retrying it cannot succeed. The underlying error
	// stays reachable with errors.As.
	ErrPermission = errors.New("permission denied")
	// ErrCorrupt means the object exists but the backend's own framing of
	// it is damaged (the fs backend's object-file header), so its bytes
	// cannot be returned.
	ErrCorrupt = errors.New("object corrupt in storage")
)
