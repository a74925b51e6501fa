package locktest

import (
	"context"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/driver"
)

// stepped is a backend whose clock stepped by d after its objects were
// written: the storage's now (Now, and the response time of every answer)
// moves, the modification times it stamped before do not. backend/fault's
// skew moves both, which is a clock that was always off, not a step.
type stepped struct {
	backend.Backend
	mu sync.Mutex
	d  time.Duration
}

var _ backend.Backend = (*stepped)(nil)

func (s *stepped) step() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.d
}

func (s *stepped) shift(o backend.Object) backend.Object {
	if !o.Now.IsZero() {
		o.Now = o.Now.Add(s.step())
	}
	return o
}

func (s *stepped) Get(ctx context.Context, key string) (io.ReadCloser, backend.Object, error) {
	rc, o, err := s.Backend.Get(ctx, key)
	return rc, s.shift(o), err
}

func (s *stepped) Put(ctx context.Context, key string, data []byte, opts backend.PutOptions) (backend.Object, error) {
	o, err := s.Backend.Put(ctx, key, data, opts)
	return s.shift(o), err
}

func (s *stepped) List(ctx context.Context, prefix string, fn func(backend.Object) error) error {
	return s.Backend.List(ctx, prefix, func(o backend.Object) error { return fn(s.shift(o)) })
}

func (s *stepped) Now(ctx context.Context) (time.Time, error) {
	t, err := s.Backend.Now(ctx)
	return t.Add(s.step()), err
}

func (s *stepped) ResolveCapabilities(ctx context.Context) (backend.Capabilities, error) {
	return driver.ResolveCapabilities(ctx, s.Backend)
}

// late is a backend whose puts of matching keys land late: the caller
// gets its context's error (a timeout) while the write still lands after
// delay — the zombie of a PUT that timed out on the client and was carried
// out by the server later.
type late struct {
	backend.Backend
	match func(key string) bool
	delay time.Duration
	wg    sync.WaitGroup

	mu     sync.Mutex
	landed []string
}

var _ backend.Backend = (*late)(nil)

func (l *late) Put(ctx context.Context, key string, data []byte, opts backend.PutOptions) (backend.Object, error) {
	if !l.match(key) {
		return l.Backend.Put(ctx, key, data, opts)
	}
	buf := append([]byte(nil), data...)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		time.Sleep(l.delay)
		if _, err := l.Backend.Put(context.Background(), key, buf, opts); err == nil {
			l.mu.Lock()
			l.landed = append(l.landed, key)
			l.mu.Unlock()
		}
	}()
	<-ctx.Done()
	return backend.Object{}, ctx.Err()
}

func (l *late) ResolveCapabilities(ctx context.Context) (backend.Capabilities, error) {
	return driver.ResolveCapabilities(ctx, l.Backend)
}

// wait waits for every late write to land.
func (l *late) wait() { l.wg.Wait() }

func (l *late) landedKeys() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.landed...)
}

func hasSuffix(suffix string) func(string) bool {
	return func(k string) bool { return strings.HasSuffix(k, suffix) }
}

// slow is a backend whose puts of matching keys take delay on the server:
// the write lands after delay whether or not the caller is still waiting,
// and the caller gets the answer if it waited that long, else its
// context's error — a request the client gave up on that the server
// carried out anyway.
type slow struct {
	backend.Backend
	match func(key string) bool
	delay time.Duration
	wg    sync.WaitGroup
	// began, when set, is sent to (without blocking) as a matching PUT
	// reaches the storage: a write is in flight from then on.
	began chan struct{}
}

var _ backend.Backend = (*slow)(nil)

func (s *slow) Put(ctx context.Context, key string, data []byte, opts backend.PutOptions) (backend.Object, error) {
	if !s.match(key) {
		return s.Backend.Put(ctx, key, data, opts)
	}
	type result struct {
		o   backend.Object
		err error
	}
	buf := append([]byte(nil), data...)
	done := make(chan result, 1)
	s.wg.Add(1)
	if s.began != nil {
		select {
		case s.began <- struct{}{}:
		default:
		}
	}
	go func() {
		defer s.wg.Done()
		time.Sleep(s.delay)
		o, err := s.Backend.Put(context.Background(), key, buf, opts)
		done <- result{o, err}
	}()
	select {
	case r := <-done:
		return r.o, r.err
	case <-ctx.Done():
		return backend.Object{}, ctx.Err()
	}
}

func (s *slow) ResolveCapabilities(ctx context.Context) (backend.Capabilities, error) {
	return driver.ResolveCapabilities(ctx, s.Backend)
}

// vanishing is a backend on which an object of a matching key, once armed,
// is deleted by someone else just before the next GET of it: the GET
// answers 404 for an object the listing before it showed — an acquirer
// deleting its intent between another process's LIST and GET. With
// failWith, the armed GET fails instead.
type vanishing struct {
	backend.Backend
	match func(key string) bool
	// onFire, when set, runs after the deletion and before the GET: what
	// the deleter did next.
	onFire func(ctx context.Context)
	// failWith, when set, makes the armed GET fail with it instead, and
	// nothing is deleted: a read that times out.
	failWith error
	// rearm keeps it armed after it fired: every GET of a matching key
	// finds it deleted.
	rearm bool

	mu    sync.Mutex
	armed bool
	gone  []string
}

var _ backend.Backend = (*vanishing)(nil)

func (v *vanishing) Get(ctx context.Context, key string) (io.ReadCloser, backend.Object, error) {
	v.mu.Lock()
	fire := v.armed && v.match(key)
	if fire {
		v.armed = v.rearm
		v.gone = append(v.gone, key)
	}
	v.mu.Unlock()
	if fire && v.failWith != nil {
		return nil, backend.Object{}, v.failWith
	}
	if fire {
		if err := v.Backend.Delete(ctx, key, backend.DeleteOptions{}); err != nil {
			return nil, backend.Object{}, err
		}
		if v.onFire != nil {
			v.onFire(ctx)
		}
	}
	return v.Backend.Get(ctx, key)
}

func (v *vanishing) ResolveCapabilities(ctx context.Context) (backend.Capabilities, error) {
	return driver.ResolveCapabilities(ctx, v.Backend)
}

// arm makes the next GET of a matching key find it deleted.
func (v *vanishing) arm() {
	v.mu.Lock()
	v.armed = true
	v.mu.Unlock()
}

// vanished are the keys deleted so far.
func (v *vanishing) vanished() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.gone...)
}
