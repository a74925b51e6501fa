//go:build !unix

package fs

import (
	"context"
	"fmt"

	"github.com/cairnhq/state/backend"
)

// platformSupported refuses: without flock(2) mutations could not be made
// atomic across processes, and the backend refuses rather than pretend.
func platformSupported() error {
	return fmt.Errorf("fs: cross-process locking needs a unix system: %w", backend.ErrUnsupported)
}

func (b *fsBackend) lock(context.Context) (func(), error) { return nil, platformSupported() }
