package store

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Keeps written behind the write (docs/adr/0065): a Put that keeps history
// returns once its value is written; the keep of what it wrote (and the
// prune) go on in a goroutine of their own, still admitted by the fences
// (the write's admission is handed to it, so a lock's Release drains it
// like any fenced write), on a context the caller's cancellation does not
// cut, bounded by the fences' deadline — or by keepLimit where they have
// none — so that every keep ends by itself. The next write, delete,
// restore, and the history reads, of the same name first wait for its
// keeps in flight, through any view of the store: a keep that failed is
// then repaired by the next write (the version is copied into history
// before it is replaced), as after a crash between a write and its keep.

// keepLimit bounds a keep behind a write through fences that have no
// deadline (a lock always has one: its lease's end).
const keepLimit = time.Minute

// errKeepLimit is the cause of a keep's context cut off at keepLimit.
var errKeepLimit = errors.New("the keep ran past its time limit")

// keepsInFlight are the keeps that writes through one store connection
// left running behind them, by backend key.
type keepsInFlight struct {
	mu sync.Mutex
	m  map[string][]chan struct{} // closed when the keep has ended
}

// add registers a keep of key in flight; it ends by closing the channel
// and calling remove.
func (k *keepsInFlight) add(key string) chan struct{} {
	ch := make(chan struct{})
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil {
		k.m = map[string][]chan struct{}{}
	}
	k.m[key] = append(k.m[key], ch)
	return ch
}

func (k *keepsInFlight) remove(key string, ch chan struct{}) {
	k.mu.Lock()
	defer k.mu.Unlock()
	cs := k.m[key]
	for i, c := range cs {
		if c == ch {
			cs = append(cs[:i], cs[i+1:]...)
			break
		}
	}
	if len(cs) == 0 {
		delete(k.m, key)
	} else {
		k.m[key] = cs
	}
}

// pending returns the keeps in flight of key, or of every key when key
// is "" (no backend key is empty).
func (k *keepsInFlight) pending(key string) []chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	if key != "" {
		return append([]chan struct{}(nil), k.m[key]...)
	}
	var out []chan struct{}
	for _, cs := range k.m {
		out = append(out, cs...)
	}
	return out
}

// waitKeeps waits until no keep of key (every key when key is "") that
// was in flight when it was called is: what a later write or read of the
// name needs to see its history whole. It fails only with ctx's error.
func (s *Store) waitKeeps(ctx context.Context, key string) error {
	for _, ch := range s.c.keeps.pending(key) {
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return nil
}

// keepBehind runs keep behind the write of key that returns now: in a
// goroutine of its own, on a context that keeps ctx's values but not its
// cancellation, bounded by the fences' deadline (keepLimit without one);
// done, the write's admission by the fences, ends with it.
func (s *Store) keepBehind(ctx context.Context, key string, done func(), keep func(ctx context.Context)) {
	bg := context.WithoutCancel(ctx)
	var (
		kctx   context.Context
		cancel context.CancelFunc
	)
	if dl, ok := s.fencesDeadline(); ok {
		kctx, cancel = context.WithDeadlineCause(bg, dl, errLeaseEnded)
	} else {
		kctx, cancel = context.WithTimeoutCause(bg, keepLimit, errKeepLimit)
	}
	ch := s.c.keeps.add(key)
	go func() {
		defer func() {
			cancel()
			done()
			s.c.keeps.remove(key, ch)
			close(ch)
		}()
		keep(kctx)
	}()
}
