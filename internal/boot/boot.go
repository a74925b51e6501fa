// Package boot is cairn-state's one first-open protocol: how state.Open
// and every cairn-state command open a store and take its lock
// (docs/adr/0034). Connect reads the store's manifest before anything
// else; Open then takes the instance lock in the lock mode the manifest
// records, writes a new store's pending manifest under it (storage
// without conditional writes), and, when another process created the
// store meanwhile, lets the lock go, connects again and starts over.
package boot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// Rounds bounds how often Open connects again because another process
// created the store's manifest while this one waited for the lock.
const Rounds = 3

// ReleaseTimeout bounds the lock release Open does on its own failure
// paths, where the caller's context may already be done.
const ReleaseTimeout = 10 * time.Second

// Options configure Connect, Acquire and Open.
type Options struct {
	// Store are the store's options (Root, MaxObjectSize, Logger,
	// MeterProvider).
	Store store.Options
	// Location names the store in messages (a URL without credentials).
	Location string
	// Create lets the connection create a store where there is none
	// (store.ConnectOptions.Create): state.Open; New creates one and
	// nothing else (store.ConnectOptions.New): `cairn-state init`. No
	// other command creates a store.
	Create, New bool
	// StoreID pins the store (store.ConnectOptions.StoreID; empty: none).
	StoreID string
	// RequireConfiguredRecipients: store.ConnectOptions'.
	RequireConfiguredRecipients bool
	// Lock are the lock's options; its Mode is set from the store's
	// manifest.
	Lock lock.Options
	// Wait, when positive, is how long a live holder is waited for (the
	// lock's WaitForStale, bounded by Wait); OnWait, when not nil, is
	// called once when the wait starts.
	Wait   time.Duration
	OnWait func(*lock.HeldError)
}

// Connect connects to the store of b with keys: the manifest first
// (store.Connect), nothing locked.
func Connect(ctx context.Context, b backend.Backend, keys store.Keys, o Options) (*store.Store, error) {
	return store.Connect(ctx, b, keys, store.ConnectOptions{
		Options:                     o.Store,
		Create:                      o.Create,
		New:                         o.New,
		StoreID:                     o.StoreID,
		RequireConfiguredRecipients: o.RequireConfiguredRecipients,
		Location:                    o.Location,
	})

}

// LockMode is the lock mode st's manifest records ("" for a store
// without one: the lock chooses from the backend's capabilities).
func LockMode(st *store.Store) lock.Mode {
	m, ok := storeadmin.Manifest(st)
	if !ok {
		return ""
	}
	return lock.Mode(m.LockMode)
}

// Acquire takes the instance lock of st in the store's lock mode. A live
// holder makes it fail with the lock's *HeldError at once, or, with
// o.Wait, once it has waited that long (o.OnWait is told when the wait
// starts): the lock's WaitForStale does the waiting.
func Acquire(ctx context.Context, st *store.Store, o Options) (*lock.Lock, error) {
	lo := o.Lock
	lo.Mode = LockMode(st)
	l, err := lock.Acquire(ctx, st, lo)
	var held *lock.HeldError
	if o.Wait <= 0 || !errors.As(err, &held) {
		return l, err
	}
	if o.OnWait != nil {
		o.OnWait(held)
	}
	wctx, cancel := context.WithTimeout(ctx, o.Wait)
	defer cancel()
	lo.WaitForStale = true
	l, err = lock.Acquire(wctx, st, lo)
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		return nil, &WaitedError{Wait: o.Wait, Err: err}
	}
	return l, err
}

// WaitedError is Acquire's error when the wait ran out: Err is the lock's
// (it reaches the *lock.HeldError).
type WaitedError struct {
	Wait time.Duration // how long it waited
	Err  error         // the lock's refusal
}

// Error says how long it waited, then why.
func (e *WaitedError) Error() string { return fmt.Sprintf("waited %s for the lock: %v", e.Wait, e.Err) }

// Unwrap returns the lock's error.
func (e *WaitedError) Unwrap() error { return e.Err }

// LockError is Open's error when the lock could not be taken; Err is the
// lock's (a *lock.HeldError for a live holder).
type LockError struct{ Err error }

// Error is the lock's error's text.
func (e *LockError) Error() string { return e.Err.Error() }

// Unwrap returns the lock's error.
func (e *LockError) Unwrap() error { return e.Err }

// Open connects to the store of b with keys and takes its lock: connect
// (the manifest first) → acquire (in the store's lock mode) → commit a
// new store's pending manifest under the lock → on a manifest another
// process wrote meanwhile, release and connect again, at most Rounds
// times. It returns the unfenced store (fence it with the lock) and the
// lock. Errors of the lock step are a *LockError; the others are the
// store's.
func Open(ctx context.Context, b backend.Backend, keys store.Keys, o Options) (*store.Store, *lock.Lock, error) {
	st, err := Connect(ctx, b, keys, o)
	if err != nil {
		return nil, nil, err
	}
	return Lock(ctx, st, keys, o)
}

// Lock is Open from its second step: st is the store Connect returned
// for keys and o.
func Lock(ctx context.Context, st *store.Store, keys store.Keys, o Options) (*store.Store, *lock.Lock, error) {
	log := o.Lock.Logger
	if log == nil {
		log = slog.Default()
	}
	b := storeadmin.Backend(st)
	for round := 1; ; round++ {
		if round > 1 {
			var err error
			if st, err = Connect(ctx, b, keys, o); err != nil {
				return nil, nil, err
			}
		}
		l, err := Acquire(ctx, st, o)
		if err != nil {
			if !storeadmin.ManifestWritten(st) && round < Rounds {
				// The lock's objects may be another new store's (its id
				// is not ours yet): look at the manifest again.
				if again, cerr := Connect(ctx, b, keys, Options{Store: o.Store, Location: o.Location, StoreID: o.StoreID}); cerr == nil {
					if _, ok := storeadmin.Manifest(again); ok {
						continue
					}
				}
			}
			return nil, nil, &LockError{Err: err}
		}
		err = storeadmin.CommitManifest(ctx, l.Fence(st))
		if err == nil {
			return st, l, nil
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReleaseTimeout)
		if rerr := l.Release(rctx); rerr != nil && !errors.Is(rerr, lock.ErrLost) {
			log.Warn("releasing the lock after the manifest could not be written", "err", rerr)
		}
		cancel()
		if !errors.Is(err, store.ErrManifestChanged) || round >= Rounds {
			return nil, nil, err
		}
		log.Info("another process created the store's manifest first; connecting to it", "round", round)
	}
}
