package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"filippo.io/age"

	"github.com/cairnhq/state/envelope"
)

// VerifyOptions configure [Store.Verify]. A nil *VerifyOptions means the
// defaults.
type VerifyOptions struct {
	// ManyOptions bound the reads: how many at once, how many sealed
	// bytes in flight.
	ManyOptions
	// Recovery, when set, are identities every object is also read with by
	// the stock age parser (envelope.Recover), whole, as an operator would
	// without this library: the proof that the recovery promise holds.
	Recovery []age.Identity
}

// Check is the verdict on one object.
type Check struct {
	Name string
	Info Info
	// Err says why the object does not open (naming it); nil when it
	// opens.
	Err error
	// Opened is what the envelope learnt, when it opens.
	Opened envelope.Opened
	// Legacy reports an object bound to no store (envelope format v1, or
	// v2 sealed by an unbound envelope), accepted while the store's format
	// is FormatLegacy; a rekey rewrites it.
	Legacy bool
	// OutsideSet reports a bound object sealed to another recipient set
	// than the store's manifest records: some identity the store lists may
	// not open it, or one it no longer lists may. A rekey re-seals it.
	OutsideSet bool
	// RecoveryChecked reports that VerifyOptions.Recovery was tried;
	// RecoveryErr is stock age's verdict (nil: it read the whole object).
	RecoveryChecked bool
	RecoveryErr     error
}

// Problem reports whether the check found anything to act on: the
// object does not open, is legacy or outside the store's set, opened only
// through a recovery identity, or failed the recovery check.
func (c Check) Problem() bool {
	return c.Err != nil || c.Legacy || c.OutsideSet || c.Opened.Unauthenticated || c.RecoveryErr != nil
}

// Verify opens every object of the store, its reserved ones (the
// manifest, the lock's, the migration log) included, and hands each
// verdict to fn, one call at a time, in no particular order. Objects that
// vanish between the listing and the read are not reported. Reads are
// bounded as GetMany's are; an object's sealed bytes are let go once fn
// returns. An error from fn stops the run and is returned; so is a listing
// error or ctx's.
func (s *Store) Verify(ctx context.Context, opts *VerifyOptions, fn func(Check) error) error {
	var o VerifyOptions
	if opts != nil {
		o = *opts
	}
	m := o.ManyOptions.withDefaults()
	in := s.Internal()
	var names []string
	if err := in.List(ctx, "", func(i Info) error {
		names = append(names, i.Name)
		return nil
	}); err != nil {
		return fmt.Errorf("store: verify: %w", err)
	}
	_, hasManifest := s.Manifest()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	budget := newByteBudget(m.MaxBytesInFlight)
	var (
		mu    sync.Mutex // serializes fn
		fnErr error
		next  atomic.Int64
		wg    sync.WaitGroup
	)
	for range min(m.Concurrency, len(names)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(names) || ctx.Err() != nil {
					return
				}
				name := names[i]
				c, release, skip := in.check(ctx, name, budget, hasManifest, o.Recovery)
				if !skip {
					mu.Lock()
					if fnErr == nil {
						if err := fn(c); err != nil {
							fnErr = err
							cancel(err)
						}
					}
					mu.Unlock()
				}
				release()
			}
		})
	}
	wg.Wait()
	if fnErr != nil {
		return fnErr
	}
	if err := context.Cause(ctx); err != nil {
		return fmt.Errorf("store: verify: %w", err)
	}
	return nil
}

// check reads and judges one object; skip is true for one that vanished.
func (s *Store) check(ctx context.Context, name string, budget *byteBudget, hasManifest bool, recovery []age.Identity) (c Check, release func(), skip bool) {
	if m := s.c.metrics; m != nil {
		defer m.end(ctx, opGet, time.Now(), &c.Err)
	}
	c.Name = name
	sealed, obj, release, err := s.readWithin(ctx, s.c.prefix+name, name, budget)
	if errors.Is(err, ErrNotFound) {
		return c, release, true
	}
	if err != nil {
		c.Err = err
		return c, release, ctx.Err() != nil
	}
	c.Info = s.info(name, obj)
	if _, opened, err := s.open(name, sealed); err != nil {
		c.Err = err
	} else {
		c.Opened = opened
		c.Legacy = opened.Version == envelope.FormatV1 || (opened.Version == envelope.FormatV2 && opened.StoreID.IsZero())
		c.OutsideSet = hasManifest && !c.Legacy && opened.Version == envelope.FormatV2 && !opened.SameRecipients
	}
	if len(recovery) > 0 {
		c.RecoveryChecked = true
		c.RecoveryErr = envelope.Recover(name, sealed, nil, recovery...)
	}
	return c, release, false
}
