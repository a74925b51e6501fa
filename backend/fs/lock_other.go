//go:build !unix

package fs

import (
	"context"
	"fmt"

	"github.com/cairnhq/state/backend"
)

// lock fails: without flock(2) mutations could not be made atomic across
// processes, and the backend refuses rather than pretend.
func (b *Backend) lock(context.Context) (func(), error) {
	return nil, fmt.Errorf("fs: cross-process locking needs a unix system: %w", backend.ErrUnsupported)
}
