// Package fault wraps a [backend.Backend] to inject the failures that real
// storage shows now and then, and to count the requests that pass through,
// so that the layers above can be tested against them deterministically.
//
// A [Backend] forwards every call to the backend it wraps until a fault is
// switched on:
//
//   - [Backend.LosePutAcks]: a conditional put is performed and then
//     answered "precondition failed", as when an SDK retries a request whose
//     first attempt succeeded but whose answer was lost;
//   - [Backend.SetIgnoreConditions]: conditions are dropped and the write is
//     performed unconditionally, while the capabilities still promise
//     compare-and-swap (a server that ignores If-None-Match and If-Match);
//   - [Backend.SetClockSkew]: the storage clock, and every modification time
//     and response time ([backend.Object.Now]) it reports, runs ahead of or
//     behind the local clock;
//   - [Backend.SetUnavailable]: every call fails at once, as in a network
//     partition;
//   - [Backend.Stall]: every call blocks until resumed or until its context
//     ends, as for a paused process or a hung connection; a stalled call
//     whose caller gave up is dropped;
//   - [Backend.HoldWrites]: puts and deletes of matching keys (a
//     multi-delete whole) are held, and
//     their callers cut off by their contexts, until delivered: then each
//     is carried out on the wrapped backend, late — a request sent before a
//     process froze, or delayed by a proxy, that the server applies after
//     the client gave up;
//   - [Backend.SetHook]: an arbitrary decision per call.
//
// Faults can be switched on and off while the backend is in use; a Backend
// is safe for concurrent use. It follows the wrapper shape of restic's
// backend/logger: it embeds nothing it does not need and overrides only what
// it adds.
package fault

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/driver"
)

// ErrInjected is the error of a call failed on purpose by
// [Backend.SetUnavailable]. Errors returned by a [Hook] are passed through
// as they are.
var ErrInjected = errors.New("injected fault: storage unavailable")

// Op names a backend operation.
type Op string

// The operations of [backend.Backend] that reach the storage.
const (
	OpGet    Op = "get"
	OpPut    Op = "put"
	OpDelete Op = "delete"
	OpList   Op = "list"
	OpNow    Op = "now"
	OpCopy   Op = "copy" // backend.Copier's Copy
	// OpDeleteMany is driver.MultiDeleter's DeleteMany: one call, however
	// many keys.
	OpDeleteMany Op = "delete-many"
)

// Call describes one call, as given to a [Hook].
type Call struct {
	Op Op
	// Key is the object key; for OpList the prefix; empty for OpNow; for
	// OpCopy the destination; for OpDeleteMany the first key.
	Key string
	// Source is the key an OpCopy copies.
	Source string
	// IfAbsent and IfVersion are the call's conditions (put and delete;
	// for OpCopy, IfAbsent is the destination's and IfVersion the
	// source's).
	IfAbsent  bool
	IfVersion string
}

// Hook decides the fate of a call before it reaches the wrapped backend:
// a non-nil error is returned to the caller and the call goes no further.
type Hook func(ctx context.Context, c Call) error

// Counts is the number of calls made, per operation.
type Counts struct {
	Get, Put, Delete, List, Now, Copy, DeleteMany int
}

// Total is the number of calls of every operation.
func (c Counts) Total() int {
	return c.Get + c.Put + c.Delete + c.List + c.Now + c.Copy + c.DeleteMany
}

// String prints the counts as "get=1 put=1 delete=0 list=0 now=0 copy=0
// delete-many=0 total=2".
func (c Counts) String() string {
	return fmt.Sprintf("get=%d put=%d delete=%d list=%d now=%d copy=%d delete-many=%d total=%d",
		c.Get, c.Put, c.Delete, c.List, c.Now, c.Copy, c.DeleteMany, c.Total())
}

// Backend is a [backend.Backend] that injects faults into the calls it
// forwards. The zero value is not usable; call [New].
type Backend struct {
	inner backend.Backend

	mu               sync.Mutex
	skew             time.Duration
	ignoreConditions bool
	lostAcks         int
	unavailable      bool
	stalled          chan struct{} // non-nil while stalled; closed on resume
	holdMatch        func(key string) bool
	held             []*heldWrite
	hook             Hook
	counts           Counts
}

var (
	_ backend.Backend = (*Backend)(nil)
	_ driver.Resolver = (*Backend)(nil)
)

// New wraps inner. With no fault switched on, the wrapper only counts.
func New(inner backend.Backend) *Backend {
	return &Backend{inner: inner}
}

// Unwrap returns the wrapped backend.
func (b *Backend) Unwrap() backend.Backend { return b.inner }

// SetClockSkew makes the storage clock read d ahead of the wrapped backend's
// (behind when d is negative): [Backend.Now] and every ModTime and Now
// returned by Get, Put and List are shifted by d.
func (b *Backend) SetClockSkew(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.skew = d
}

// SetIgnoreConditions makes conditional puts and deletes unconditional,
// while [Backend.Capabilities] keeps reporting what the wrapped backend
// reports: a server that accepts If-None-Match and If-Match and ignores them.
func (b *Backend) SetIgnoreConditions(on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ignoreConditions = on
}

// LosePutAcks makes the next n conditional puts succeed on the wrapped
// backend and then answer an error wrapping [backend.ErrPreconditionFailed]:
// what a client sees when it retries a conditional write whose first
// attempt succeeded but whose response was lost.
func (b *Backend) LosePutAcks(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lostAcks = n
}

// SetUnavailable makes every call fail at once with an error wrapping
// [ErrInjected] (on), or heals the backend (off).
func (b *Backend) SetUnavailable(on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.unavailable = on
}

// Stall makes every call, including those already waiting, block until
// resume is called or the call's context ends (then it returns the context's
// error). Calling resume more than once is harmless.
func (b *Backend) Stall() (resume func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stalled == nil {
		b.stalled = make(chan struct{})
	}
	ch := b.stalled
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			if b.stalled == ch {
				b.stalled = nil
			}
			close(ch)
		})
	}
}

// heldWrite is a write held by HoldWrites: run carries it out; done
// receives its result, if its caller still waits.
type heldWrite struct {
	run  func(context.Context) (backend.Object, error)
	done chan heldResult
}

type heldResult struct {
	obj backend.Object
	err error
}

// HoldWrites holds every put and delete whose key match accepts (every
// key when match is nil) from now on: its caller waits until the write is
// delivered, and gets its answer, or until its context ends, and gets the
// context's error while the write stays held. deliver carries out every
// write held so far on the wrapped backend, in the order they came, with
// no context of their callers' (a request already on the wire), and stops
// holding; it returns how many it delivered and their errors (nil for
// each that succeeded), so that a test can see whether a late write
// landed.
func (b *Backend) HoldWrites(match func(key string) bool) (deliver func() []error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if match == nil {
		match = func(string) bool { return true }
	}
	b.holdMatch = match
	var once sync.Once
	var errs []error
	return func() []error {
		once.Do(func() {
			b.mu.Lock()
			held := b.held
			b.held, b.holdMatch = nil, nil
			b.mu.Unlock()
			for _, h := range held {
				obj, err := h.run(context.Background())
				errs = append(errs, err)
				h.done <- heldResult{obj, err}
			}
		})
		return errs
	}
}

// hold holds a write when HoldWrites matches any of its keys (one, but a
// DeleteMany's several): prepare makes the write to carry out later (with
// copies of what its caller may reuse), and hold waits for the delivery's
// answer or the caller's context. ok is false when the write is not held.
func (b *Backend) hold(ctx context.Context, keys []string, prepare func() (func(context.Context) (backend.Object, error), error)) (obj backend.Object, ok bool, err error) {
	b.mu.Lock()
	if b.holdMatch == nil || !slices.ContainsFunc(keys, b.holdMatch) {
		b.mu.Unlock()
		return backend.Object{}, false, nil
	}
	run, err := prepare()
	if err != nil {
		b.mu.Unlock()
		return backend.Object{}, true, err
	}
	h := &heldWrite{run: run, done: make(chan heldResult, 1)}
	b.held = append(b.held, h)
	b.mu.Unlock()
	select {
	case r := <-h.done:
		return r.obj, true, r.err
	case <-ctx.Done():
		return backend.Object{}, true, ctx.Err()
	}
}

// SetHook installs h, which is consulted before every call; nil removes it.
func (b *Backend) SetHook(h Hook) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hook = h
}

// Counts returns the number of calls made so far, including failed ones.
func (b *Backend) Counts() Counts {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.counts
}

// ResetCounts sets every count back to zero.
func (b *Backend) ResetCounts() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.counts = Counts{}
}

// enter counts the call, applies stall, unavailability and the hook, and
// returns the skew to apply to its result.
func (b *Backend) enter(ctx context.Context, c Call) (time.Duration, error) {
	b.mu.Lock()
	switch c.Op {
	case OpGet:
		b.counts.Get++
	case OpPut:
		b.counts.Put++
	case OpDelete:
		b.counts.Delete++
	case OpList:
		b.counts.List++
	case OpNow:
		b.counts.Now++
	case OpCopy:
		b.counts.Copy++
	case OpDeleteMany:
		b.counts.DeleteMany++
	}
	stalled, hook := b.stalled, b.hook
	b.mu.Unlock()

	if stalled != nil {
		select {
		case <-stalled:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	b.mu.Lock()
	unavailable, skew := b.unavailable, b.skew
	b.mu.Unlock()
	if unavailable {
		if c.Key == "" {
			return 0, fmt.Errorf("%s: %w", c.Op, ErrInjected)
		}
		return 0, fmt.Errorf("%s %q: %w", c.Op, c.Key, ErrInjected)
	}
	if hook != nil {
		if err := hook(ctx, c); err != nil {
			return 0, err
		}
	}
	return skew, nil
}

// Get implements backend.Backend.
func (b *Backend) Get(ctx context.Context, key string) (io.ReadCloser, backend.Object, error) {
	skew, err := b.enter(ctx, Call{Op: OpGet, Key: key})
	if err != nil {
		return nil, backend.Object{}, err
	}
	rc, obj, err := b.inner.Get(ctx, key)
	if err != nil {
		return nil, backend.Object{}, err
	}
	return rc, shift(obj, skew), nil
}

// Put implements backend.Backend.
func (b *Backend) Put(ctx context.Context, key string, data []byte, opts backend.PutOptions) (backend.Object, error) {
	return b.put(ctx, key, opts, func(ctx context.Context, opts backend.PutOptions) (backend.Object, error) {
		return b.inner.Put(ctx, key, data, opts)
	}, func() ([]byte, error) {
		return append([]byte(nil), data...), nil
	})
}

// put is Put's and PutBody's path through the faults: send writes to the
// wrapped backend; copyData copies what a held write carries out later,
// when its caller may have reused or closed its bytes.
func (b *Backend) put(ctx context.Context, key string, opts backend.PutOptions, send func(context.Context, backend.PutOptions) (backend.Object, error), copyData func() ([]byte, error)) (backend.Object, error) {
	skew, err := b.enter(ctx, Call{Op: OpPut, Key: key, IfAbsent: opts.IfAbsent, IfVersion: opts.IfVersion})
	if err != nil {
		return backend.Object{}, err
	}
	conditional := opts.IfAbsent || opts.IfVersion != ""
	b.mu.Lock()
	if conditional && b.ignoreConditions {
		opts = backend.PutOptions{}
	}
	loseAck := conditional && b.lostAcks > 0
	if loseAck {
		b.lostAcks--
	}
	b.mu.Unlock()

	if obj, held, err := b.hold(ctx, []string{key}, func() (func(context.Context) (backend.Object, error), error) {
		buf, err := copyData()
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) (backend.Object, error) {
			obj, err := driver.PutBody(ctx, b.inner, key, bytes.NewReader(buf), int64(len(buf)), opts)
			return shift(obj, skew), err
		}, nil
	}); held {
		return obj, err
	}
	obj, err := send(ctx, opts)
	if err != nil {
		return backend.Object{}, err
	}
	if loseAck {
		return backend.Object{}, fmt.Errorf("put %q (retried after a lost response): %w", key, backend.ErrPreconditionFailed)
	}
	return shift(obj, skew), nil
}

// Delete implements backend.Backend.
func (b *Backend) Delete(ctx context.Context, key string, opts backend.DeleteOptions) error {
	if _, err := b.enter(ctx, Call{Op: OpDelete, Key: key, IfVersion: opts.IfVersion}); err != nil {
		return err
	}
	b.mu.Lock()
	if opts.IfVersion != "" && b.ignoreConditions {
		opts = backend.DeleteOptions{}
	}
	b.mu.Unlock()
	if _, held, err := b.hold(ctx, []string{key}, func() (func(context.Context) (backend.Object, error), error) {
		return func(ctx context.Context) (backend.Object, error) {
			return backend.Object{}, b.inner.Delete(ctx, key, opts)
		}, nil
	}); held {
		return err
	}
	return b.inner.Delete(ctx, key, opts)
}

// List implements backend.Backend.
func (b *Backend) List(ctx context.Context, prefix string, fn func(backend.Object) error) error {
	skew, err := b.enter(ctx, Call{Op: OpList, Key: prefix})
	if err != nil {
		return err
	}
	return b.inner.List(ctx, prefix, func(o backend.Object) error {
		return fn(shift(o, skew))
	})
}

// shift moves the storage-clock times of o by skew; a zero Now (the wrapped
// backend could not tell) stays zero.
func shift(o backend.Object, skew time.Duration) backend.Object {
	o.ModTime = o.ModTime.Add(skew)
	if !o.Now.IsZero() {
		o.Now = o.Now.Add(skew)
	}
	return o
}

// Capabilities implements backend.Backend. It reports the wrapped backend's
// capabilities, whatever faults are on.
func (b *Backend) Capabilities() backend.Capabilities { return b.inner.Capabilities() }

// ResolveCapabilities implements driver.Resolver: it resolves the wrapped
// backend's capabilities (driver.ResolveCapabilities). It is not a storage
// call of its own, so it is neither counted nor subject to faults; the
// requests a resolution makes are the wrapped backend's.
func (b *Backend) ResolveCapabilities(ctx context.Context) (backend.Capabilities, error) {
	return driver.ResolveCapabilities(ctx, b.inner)
}

// Now implements backend.Backend.
func (b *Backend) Now(ctx context.Context) (time.Time, error) {
	skew, err := b.enter(ctx, Call{Op: OpNow})
	if err != nil {
		return time.Time{}, err
	}
	t, err := b.inner.Now(ctx)
	if err != nil {
		return time.Time{}, err
	}
	return t.Add(skew), nil
}
