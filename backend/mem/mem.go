// Package mem is an in-memory [backend.Backend] for unit tests of the layers
// above the backend. It is not durable and lives in one process; use it to
// test logic, never as a substitute for a real backend's own tests.
package mem

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairnhq/state/backend"
)

// Options configure a backend made by [New]. The zero value is usable.
type Options struct {
	// NoConditionalWrites makes the backend behave like storage without
	// compare-and-swap: it reports no conditional writes and refuses
	// conditional calls with backend.ErrUnsupported.
	NoConditionalWrites bool
	// Clock returns the storage's time; nil means time.Now.
	Clock func() time.Time
}

// memBackend keeps objects in a map.
type memBackend struct {
	opts Options

	mu      sync.Mutex
	objects map[string]entry
	seq     uint64
}

type entry struct {
	data []byte
	obj  backend.Object
}

var _ backend.Backend = (*memBackend)(nil)

// New returns an empty in-memory backend. It is safe for concurrent use
// and copies objects (backend.Copier) with both conditions enforced,
// unless it was made without conditional writes: then a conditional copy
// fails with backend.ErrUnsupported.
func New(opts Options) backend.Backend {
	return &memBackend{opts: opts, objects: make(map[string]entry)}
}

func (b *memBackend) now() time.Time {
	if b.opts.Clock != nil {
		return b.opts.Clock()
	}
	return time.Now()
}

// Get implements backend.Backend.
func (b *memBackend) Get(ctx context.Context, key string) (io.ReadCloser, backend.Object, error) {
	if err := check(ctx, key); err != nil {
		return nil, backend.Object{}, err
	}
	b.mu.Lock()
	e, ok := b.objects[key]
	b.mu.Unlock()
	if !ok {
		return nil, backend.Object{}, fmt.Errorf("get %q: %w", key, backend.ErrNotFound)
	}
	obj := e.obj
	obj.Now = b.now()
	return io.NopCloser(bytes.NewReader(e.data)), obj, nil
}

// Put implements backend.Backend.
func (b *memBackend) Put(ctx context.Context, key string, data []byte, opts backend.PutOptions) (backend.Object, error) {
	if err := check(ctx, key); err != nil {
		return backend.Object{}, err
	}
	if opts.IfAbsent && opts.IfVersion != "" {
		return backend.Object{}, fmt.Errorf("put %q: IfAbsent and IfVersion both set: %w", key, backend.ErrUnsupported)
	}
	conditional := opts.IfAbsent || opts.IfVersion != ""
	if conditional && b.opts.NoConditionalWrites {
		return backend.Object{}, fmt.Errorf("put %q: conditional write: %w", key, backend.ErrUnsupported)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	cur, exists := b.objects[key]
	if opts.IfAbsent && exists {
		return backend.Object{}, fmt.Errorf("put %q if absent: %w", key, backend.ErrPreconditionFailed)
	}
	if opts.IfVersion != "" && (!exists || cur.obj.Version != opts.IfVersion) {
		return backend.Object{}, fmt.Errorf("put %q if version %s: %w", key, opts.IfVersion, backend.ErrPreconditionFailed)
	}
	b.seq++
	now := b.now()
	obj := backend.Object{
		Key:     key,
		Size:    int64(len(data)),
		Version: strconv.FormatUint(b.seq, 10),
		ModTime: now,
	}
	b.objects[key] = entry{data: bytes.Clone(data), obj: obj}
	obj.Now = now
	return obj, nil
}

// Delete implements backend.Backend.
func (b *memBackend) Delete(ctx context.Context, key string, opts backend.DeleteOptions) error {
	if err := check(ctx, key); err != nil {
		return err
	}
	if opts.IfVersion != "" && b.opts.NoConditionalWrites {
		return fmt.Errorf("delete %q: conditional delete: %w", key, backend.ErrUnsupported)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	cur, exists := b.objects[key]
	if !exists {
		if opts.IfVersion != "" && opts.AbsentOK {
			return nil
		}
		if opts.IfVersion != "" {
			return fmt.Errorf("delete %q if version %s: %w", key, opts.IfVersion, backend.ErrPreconditionFailed)
		}
		return fmt.Errorf("delete %q: %w", key, backend.ErrNotFound)
	}
	if opts.IfVersion != "" && cur.obj.Version != opts.IfVersion {
		return fmt.Errorf("delete %q if version %s: %w", key, opts.IfVersion, backend.ErrPreconditionFailed)
	}
	delete(b.objects, key)
	return nil
}

// List implements backend.Backend.
func (b *memBackend) List(ctx context.Context, prefix string, fn func(backend.Object) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := backend.ValidatePrefix(prefix); err != nil {
		return err
	}
	b.mu.Lock()
	now := b.now()
	var objs []backend.Object
	for k, e := range b.objects {
		if strings.HasPrefix(k, prefix) {
			o := e.obj
			o.Now = now
			objs = append(objs, o)
		}
	}
	b.mu.Unlock()
	sort.Slice(objs, func(i, j int) bool { return objs[i].Key < objs[j].Key })
	for _, o := range objs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(o); err != nil {
			return err
		}
	}
	return nil
}

// Capabilities implements backend.Backend.
func (b *memBackend) Capabilities() backend.Capabilities {
	return backend.Capabilities{ConditionalWrites: !b.opts.NoConditionalWrites, CopySourceConditions: !b.opts.NoConditionalWrites}
}

// Now implements backend.Backend.
func (b *memBackend) Now(ctx context.Context) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	return b.now(), nil
}

func check(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return backend.ValidateKey(key)
}
