//go:build unix

package fs_test

import (
	"io"
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/backendtest"
	"github.com/cairnhq/state/backend/fs"
)

func newBackend(t testing.TB, opts fs.Options) (backend.Backend, string) {
	t.Helper()
	dir := t.TempDir()
	b, err := fs.New(dir, opts)
	if err != nil {
		t.Fatalf("fs.New(%s): %v", dir, err)
	}
	t.Cleanup(func() { b.(io.Closer).Close() })
	return b, dir
}

func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		NewBackend: func(t *testing.T) backend.Backend {
			b, _ := newBackend(t, fs.Options{})
			return b
		},
	})
}
