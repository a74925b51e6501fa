// Package backend is the driver contract that every storage backend of
// cairn-state implements: opaque bytes under keys, a version and a
// modification time per object, conditional writes where the server can do
// them atomically, and the storage server's own clock.
//
// # Implementing a backend
//
// A backend is correct when [github.com/cairnhq/state/backend/backendtest.Run]
// passes against it. The checklist:
//
//  1. Validate every key with [ValidateKey] before touching storage, and
//     return its error (it wraps [ErrInvalidKey]) unchanged.
//  2. Map the storage's "no such object" to [ErrNotFound] and a failed
//     condition to [ErrPreconditionFailed], wrapped with %w so that
//     errors.Is finds the sentinel and errors.As still reaches the
//     underlying error. Pass context errors through unchanged.
//  3. Report in [Capabilities] whether conditional writes are atomic. A
//     backend that cannot honour a condition returns [ErrUnsupported] for a
//     conditional call and never performs the write unconditionally.
//  4. Give every successful write a new [Object.Version]: two writes of the
//     same bytes still get different versions, so compare-and-swap cannot be
//     fooled by an ABA write. (S3 cannot: its ETag is the MD5 of the bytes.
//     A backend like that says so in its docs and sets
//     backendtest.Harness.ContentAddressedVersions; the store stays safe
//     because age sealing makes every write's bytes differ.)
//  5. Never show a torn object: a reader sees the whole old object or the
//     whole new one.
//  6. List keys in lexical order, paginating internally, and hide any
//     bookkeeping files of the backend's own.
//  7. Report the storage's clock from [Backend.Now]; callers judge
//     staleness on it rather than on their local clock. Also set
//     [Object.Now] on the objects Get, Put and List return: the storage's
//     clock when it answered that request (on S3, the response's Date
//     header; for List, the time of the page's response), or zero where
//     the backend cannot tell. A caller can then judge an object's age
//     from the one request that read it.
//  8. Map a refusal that retrying cannot cure — access denied, a read-only
//     file system — to [ErrPermission], wrapped with %w.
//  9. If the backend holds resources (a directory handle, connections),
//     implement io.Closer; the state package closes backends it opened.
//  10. If some capability can only be learnt by asking the storage (the S3
//     backend's conditional-write probe), add the method
//     ResolveCapabilities(ctx) (Capabilities, error), which cairn-state
//     calls before it relies on conditional writes: until it has
//     succeeded, Capabilities reports the capability as absent and calls
//     that need it fail with [ErrUnsupported], and no operation other
//     than ResolveCapabilities may write anything for the backend's own
//     purposes. If those capabilities can also be given instead of found
//     (a store records them when it is created, so that later opens need
//     not probe), add AdoptCapabilities(Capabilities) error too, failing
//     with [ErrCapabilityMismatch] where it cannot use them.
//  11. If the storage can copy an object to another key without the bytes
//     passing through the caller, implement [Copier], with its conditions
//     where the storage enforces them and ErrUnsupported where it does
//     not.
//  12. A wrapper (a backend over another: logging, retries, fault
//     injection) forwards every optional method of the backend it wraps:
//     Copy, ResolveCapabilities, AdoptCapabilities, PutBody(ctx, key,
//     body io.ReaderAt, size int64, opts PutOptions) (Object, error),
//     with which cairn-state's backends write an object from a body read
//     where it lies, so that a large value is never held in memory whole,
//     and DeleteMany(ctx, keys []string) error, with which they delete
//     several objects in one request where the storage can (S3
//     DeleteObjects; without it, one Delete per key is sent).
package backend

import (
	"context"
	"errors"
	"io"
	"time"
)

// Object describes one stored object.
type Object struct {
	// Key is the object's full key, as given to Put.
	Key string
	// Size is the object's length in bytes.
	Size int64
	// Version changes on every successful write of the key (an ETag on
	// S3). It is opaque: compare it for equality only.
	Version string
	// ModTime is when the object was last written, on the storage's clock.
	// Its resolution depends on the backend (one second on S3).
	ModTime time.Time
	// Now is the storage's clock when it answered the request that
	// produced this Object (Get, Put, or the List page it came in), at the
	// same resolution as Backend.Now; zero when the backend cannot tell.
	// Now minus ModTime is the object's age as the storage saw it, with
	// no second request and no local clock involved.
	Now time.Time
}

// PutOptions are the conditions of a Put. The zero value is an
// unconditional write. At most one condition may be set.
type PutOptions struct {
	// IfAbsent makes the write succeed only if no object has the key.
	IfAbsent bool
	// IfVersion, when not empty, makes the write succeed only if the
	// object exists with this version.
	IfVersion string
}

// DeleteOptions are the conditions of a Delete. The zero value is an
// unconditional delete.
type DeleteOptions struct {
	// IfVersion, when not empty, makes the delete succeed only if the
	// object exists with this version.
	IfVersion string
	// AbsentOK, with IfVersion, counts an object that is already gone as
	// deleted: the delete then succeeds rather than failing with
	// ErrPreconditionFailed, and a backend may skip the request that
	// tells a missing object from one it deleted (the S3 backend's
	// HeadObject). For a caller to whom both mean "no object of that
	// version is left", as the lock's release (docs/adr/0055).
	AbsentOK bool
}

// Capabilities are what a backend can do beyond the plain operations.
type Capabilities struct {
	// ConditionalWrites reports that PutOptions and DeleteOptions
	// conditions are enforced atomically by the storage. When false,
	// conditional calls fail with ErrUnsupported.
	ConditionalWrites bool
	// CopySourceConditions reports that the backend's [Copier] enforces
	// CopyOptions.IfSourceVersion: a conditional copy then copies exactly
	// that version's bytes or fails. When false, such a copy fails with
	// ErrUnsupported (or the backend has no Copier at all).
	CopySourceConditions bool
	// Evidence says, in a sentence, what ConditionalWrites was decided
	// from (the S3 probe's findings, a URL that forced it, a record it
	// was adopted from); empty for a backend whose capabilities are fixed.
	Evidence string
}

// Backend stores opaque bytes under keys. Implementations are safe for
// concurrent use by multiple goroutines.
type Backend interface {
	// Get opens the object at key for reading. The caller must close the
	// reader. It returns an error wrapping ErrNotFound when there is no
	// such object.
	Get(ctx context.Context, key string) (io.ReadCloser, Object, error)

	// Put writes data at key, atomically: readers see the old object or
	// the new one, never a mix. With opts.IfAbsent it fails with
	// ErrPreconditionFailed when the key exists; with opts.IfVersion when
	// the key is absent or has another version. A backend without
	// conditional writes returns ErrUnsupported for any condition and
	// writes nothing. Setting both conditions is a caller error, refused
	// without writing. A backend may also refuse, with ErrUnsupported and
	// without writing, a valid key its storage cannot represent (the fs
	// backend: a path segment longer than the file system's name limit).
	// Put does not retain data. It returns the new object's description,
	// ModTime included (on the storage's clock).
	Put(ctx context.Context, key string, data []byte, opts PutOptions) (Object, error)

	// Delete removes the object at key. It returns an error wrapping
	// ErrNotFound when there is no such object (a backend whose storage
	// cannot tell reports success; Capabilities does not promise either).
	// With opts.IfVersion it fails with ErrPreconditionFailed unless the
	// object exists with that version; without conditional writes it
	// returns ErrUnsupported and deletes nothing.
	Delete(ctx context.Context, key string, opts DeleteOptions) error

	// List calls fn for every object whose key starts with prefix, in
	// lexical key order. It stops at the first error fn returns and
	// returns that error. An empty prefix lists everything.
	List(ctx context.Context, prefix string, fn func(Object) error) error

	// Capabilities reports what the backend can do; for a backend that
	// finds them by asking the storage, what is known so far (nothing
	// beyond the plain operations until ResolveCapabilities has
	// succeeded, checklist item 10).
	Capabilities() Capabilities

	// Now returns the current time on the storage's clock.
	Now(ctx context.Context) (time.Time, error)
}

// ErrCapabilityMismatch means a backend was told to use capabilities
// (AdoptCapabilities, checklist item 10) other than the ones it is
// configured for or has found: an S3 URL whose conditional= parameter forces the other lock
// mode than the store records, or storage without the conditional writes
// the store relies on. Nothing was changed.
var ErrCapabilityMismatch = errors.New("the backend's capabilities differ from the ones the store records")
