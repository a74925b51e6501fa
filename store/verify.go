package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"filippo.io/age"

	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/storehook"
)

// verify is storeadmin.Verify: it opens every object of the store, its
// reserved ones (the manifest, the lock's, the migration log) included,
// and hands each verdict to fn, one call at a time, in no particular order. Objects that
// vanish between the listing and the read are not reported. Reads are
// bounded as GetMany's are; an object's sealed bytes are let go once fn
// returns. An error from fn stops the run and is returned; so is a listing
// error or ctx's.
func (s *Store) verify(ctx context.Context, o storehook.VerifyOptions[ManyOptions], fn func(verdict) error) error {
	m := o.Many.withDefaults()
	if err := s.waitKeeps(ctx, ""); err != nil {
		return fmt.Errorf("store: verify: waiting for the keeps in flight: %w", err)
	}
	in := s.internalView()
	var names []string
	if err := in.List(ctx, "", func(i Info) error {
		names = append(names, i.Name)
		return nil
	}); err != nil {
		return fmt.Errorf("store: verify: %w", err)
	}
	_, hasManifest := s.manifest()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	budget := newByteBudget(m.MaxBytesInFlight)
	// History first, so that every current object is judged against the
	// authenticated stamps its history keeps (ADR 0040 §7, §9).
	var entries, objects []string
	for _, n := range names {
		if _, _, _, ok := parseEntry(n); ok {
			entries = append(entries, n)
		} else {
			objects = append(objects, n)
		}
	}
	var (
		mu     sync.Mutex // serializes fn, guards newest
		fnErr  error
		newest = map[string]keptStamp{}
	)
	pass := func(names []string, judge func(*verdict)) {
		var (
			next atomic.Int64
			wg   sync.WaitGroup
		)
		for range min(m.Concurrency, len(names)) {
			wg.Go(func() {
				for {
					i := int(next.Add(1) - 1)
					if i >= len(names) || ctx.Err() != nil {
						return
					}
					c, release, skip := in.check(ctx, names[i], budget, hasManifest, o.Recovery)
					if !skip {
						mu.Lock()
						judge(&c)
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
	}
	pass(entries, func(c *verdict) {
		name, id, deleted, _ := parseEntry(c.Name)
		if c.Err != nil {
			return
		}
		got := idOf(c.Opened.Stamp)
		if !sameVersion(id, c.Opened.Stamp) {
			c.Err = fmt.Errorf("store: %q: %w: misnamed: it holds version %s, not %s (someone who can write the storage moved it)", c.Name, ErrUnreadable, got, id)
			return
		}
		if k, ok := newest[name]; !ok || got.Compare(k.id) > 0 {
			newest[name] = keptStamp{id: got, deleted: deleted}
		}
	})
	pass(objects, func(c *verdict) {
		if c.Err != nil || strings.HasPrefix(c.Name, ".") {
			return
		}
		if k, ok := newest[c.Name]; ok {
			if pb := putBack(c.Name, idOf(c.Opened.Stamp), k.id, k.deleted); pb != nil {
				c.PutBack = pb
			}
		}
	})
	if fnErr != nil {
		return fnErr
	}
	if err := context.Cause(ctx); err != nil {
		return fmt.Errorf("store: verify: %w", err)
	}
	return nil
}

// verdict is verify's verdict on one object.
type verdict = storehook.Check[Info]

// keptStamp is the newest authenticated stamp a name's history holds.
type keptStamp struct {
	id      VersionID
	deleted bool
}

// check reads and judges one object; skip is true for one that vanished.
func (s *Store) check(ctx context.Context, name string, budget *byteBudget, hasManifest bool, recovery []age.Identity) (c verdict, release func(), skip bool) {
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
		c.Info.ID = idOf(opened.Stamp)
		c.OutsideSet = hasManifest && !opened.SameRecipients
	}
	if len(recovery) > 0 {
		c.RecoveryChecked = true
		c.RecoveryErr = envelope.Recover(boundName(name), sealed, nil, recovery...)
	}
	return c, release, false
}
