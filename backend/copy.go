package backend

import "context"

// CopyOptions are the conditions of a [Copier.Copy]. The zero value is an
// unconditional copy; the two conditions may be combined, since they are
// on different keys.
type CopyOptions struct {
	// IfSourceVersion, when not empty, makes the copy succeed only if the
	// source exists with this version (S3's x-amz-copy-source-if-match):
	// what is copied is then that version's bytes and no other's.
	IfSourceVersion string
	// IfAbsent makes the copy succeed only if no object has the
	// destination key (If-None-Match: * on the copy).
	IfAbsent bool
}

// Copier is implemented by backends that copy an object to another key
// inside the storage (a server-side copy: S3 CopyObject, a file copy on a
// local directory), so that the bytes never pass through the caller.
// Callers find it by type assertion; a wrapper forwards it.
type Copier interface {
	// Copy writes the bytes of the object at srcKey to dstKey, as Put
	// would: atomically (readers of dstKey see its old object or the
	// whole copy), with a new version for dstKey (on a backend with
	// content-addressed versions, S3's ETags, the copy's version equals
	// the source's, as a Put of the same bytes would). The source is
	// read at one instant: a write of srcKey racing the copy leaves the
	// copy holding the old bytes or the new, never a mix.
	//
	// Both keys are validated first ([ValidateKey]); a copy of a key onto
	// itself is refused with ErrUnsupported, copying nothing. Without
	// conditions, a missing source fails with ErrNotFound. With
	// opts.IfSourceVersion it fails with ErrPreconditionFailed when the
	// source is missing or has another version; with opts.IfAbsent when
	// dstKey exists. A condition the storage cannot enforce atomically
	// fails with ErrUnsupported and copies nothing: a backend never
	// degrades a conditional copy into an unconditional one (one whose
	// capabilities are resolved by asking the storage refuses conditions
	// until they are). It
	// returns the destination's description; Size is -1 where the
	// storage does not report it (S3's CopyObject).
	Copy(ctx context.Context, srcKey, dstKey string, opts CopyOptions) (Object, error)
}
