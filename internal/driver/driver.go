// Package driver is the side of the backend contract that only
// cairn-state's own backends, wrappers and packages use (docs/adr/0062):
// capabilities found by asking the storage ([Resolver]) or given from a
// store's record ([Adopter]), objects written from a body read where it
// lies ([BodyPutter]), the checks every backend.Copier makes, and the
// local directory's diagnosis. Each is an optional method set that a
// backend implements and callers find by type assertion, through the
// functions here, which fall back where a backend lacks it; a wrapper
// forwards each to the backend it wraps by calling the function of the
// same name.
package driver

import (
	"context"
	"fmt"

	"github.com/cairnhq/state/backend"
)

// Resolver is implemented by backends whose capabilities are found by
// asking the storage (the S3 backend's conditional-write probe under
// conditional=auto). Until ResolveCapabilities has succeeded once, such a
// backend's Capabilities reports no conditional writes and its
// conditional calls fail with backend.ErrUnsupported, saying that the
// capabilities were not resolved; read-only use never needs to resolve
// them, and so never writes.
//
// ResolveCapabilities finds the capabilities (at most once for the
// backend's life: concurrent callers share one resolution, and the result
// is kept) and returns them. A failed resolution is not kept: the next call
// tries again.
type Resolver interface {
	ResolveCapabilities(ctx context.Context) (backend.Capabilities, error)
}

// ResolveCapabilities returns b's capabilities, resolving them first when b
// is a [Resolver]. Callers that are about to depend on conditional writes
// (acquiring a lock, a compare-and-swap update) call it once first; read
// paths do not.
func ResolveCapabilities(ctx context.Context, b backend.Backend) (backend.Capabilities, error) {
	if r, ok := b.(Resolver); ok {
		return r.ResolveCapabilities(ctx)
	}
	return b.Capabilities(), nil
}

// Adopter is implemented by backends whose capabilities are otherwise
// found by asking the storage ([Resolver]) and that can be given them
// instead: as a store recorded them when it was created, so that the
// storage is not asked again by every process.
type Adopter interface {
	// AdoptCapabilities makes the backend report caps (and use them)
	// without asking the storage. It fails, changing nothing, with an
	// error wrapping backend.ErrCapabilityMismatch when the backend's
	// configuration forces other capabilities, or it has already found
	// others.
	AdoptCapabilities(caps backend.Capabilities) error
}

// AdoptCapabilities makes b use caps, as a store recorded them: through
// [Adopter] where b implements it (no request is sent), otherwise by
// resolving b's own capabilities (see [ResolveCapabilities]) and checking
// them. Conditional writes recorded but absent fail with an error
// wrapping backend.ErrCapabilityMismatch; conditional writes present but
// not recorded are fine (the store uses the protocol for storage without
// them, which holds on any storage).
func AdoptCapabilities(ctx context.Context, b backend.Backend, caps backend.Capabilities) error {
	if a, ok := b.(Adopter); ok {
		return a.AdoptCapabilities(caps)
	}
	got, err := ResolveCapabilities(ctx, b)
	if err != nil {
		return err
	}
	if caps.ConditionalWrites && !got.ConditionalWrites {
		return fmt.Errorf("%w: the store relies on conditional writes, which this backend does not have", backend.ErrCapabilityMismatch)
	}
	return nil
}
