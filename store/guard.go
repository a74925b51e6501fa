package store

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/driver"
)

// Guard wraps b for the application's own use of the same bucket or
// directory. Every operation on a key under <root>/.cairn-state/ (or on
// <root>/.cairn-state itself, which would block the folder on a file
// system) fails with an error wrapping ErrReservedKey before storage is
// touched, and List hides those keys — so application code cannot read,
// overwrite or delete state. The comparison ignores case, because on a
// case-insensitive file system ".Cairn-State/x" is the same file.
//
// root is the store's root prefix, as in Options.Root; surrounding '/' are
// ignored, so a mistyped "/apps/one" still protects "apps/one". Other
// operations pass through unchanged.
func Guard(b backend.Backend, root string) backend.Backend {
	root = strings.Trim(root, "/")
	p := reservedPrefix(root)
	return &guard{Backend: b, prefix: strings.ToLower(p), folder: strings.ToLower(strings.TrimSuffix(p, "/"))}
}

type guard struct {
	backend.Backend
	prefix string // lower-cased "<root>/.cairn-state/"
	folder string // lower-cased "<root>/.cairn-state"
}

var (
	_ backend.Backend = (*guard)(nil)
	_ driver.Resolver = (*guard)(nil)
)

// ResolveCapabilities forwards to the guarded backend, so that a guarded
// backend's capabilities are resolved like its own.
func (g *guard) ResolveCapabilities(ctx context.Context) (backend.Capabilities, error) {
	return driver.ResolveCapabilities(ctx, g.Backend)
}

func (g *guard) reserved(key string) bool {
	k := strings.ToLower(key)
	return k == g.folder || strings.HasPrefix(k, g.prefix)
}

func (g *guard) check(op, key string) error {
	if g.reserved(key) {
		return fmt.Errorf("%s %q: %w", op, key, ErrReservedKey)
	}
	return nil
}

func (g *guard) Get(ctx context.Context, key string) (io.ReadCloser, backend.Object, error) {
	if err := g.check("get", key); err != nil {
		return nil, backend.Object{}, err
	}
	return g.Backend.Get(ctx, key)
}

func (g *guard) Put(ctx context.Context, key string, data []byte, opts backend.PutOptions) (backend.Object, error) {
	if err := g.check("put", key); err != nil {
		return backend.Object{}, err
	}
	return g.Backend.Put(ctx, key, data, opts)
}

func (g *guard) Delete(ctx context.Context, key string, opts backend.DeleteOptions) error {
	if err := g.check("delete", key); err != nil {
		return err
	}
	return g.Backend.Delete(ctx, key, opts)
}

func (g *guard) List(ctx context.Context, prefix string, fn func(backend.Object) error) error {
	if strings.HasPrefix(strings.ToLower(prefix), g.prefix) {
		return fmt.Errorf("list %q: %w", prefix, ErrReservedKey)
	}
	return g.Backend.List(ctx, prefix, func(o backend.Object) error {
		if g.reserved(o.Key) {
			return nil
		}
		return fn(o)
	})
}
