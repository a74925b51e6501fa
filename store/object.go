package store

import (
	"context"
	"fmt"
	"time"

	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/storehook"
)

// object is one object read whole and opened (storeadmin.GetObject).
type object = storehook.Object[Info]

// getObjectNamed is storeadmin.GetObject: it reads and opens one object
// as Get does, and also returns its sealed bytes and what the envelope
// learnt about it. Its errors are Get's.
func (s *Store) getObjectNamed(ctx context.Context, name string) (_ object, err error) {
	if m := s.c.metrics; m != nil {
		defer m.end(ctx, opGet, time.Now(), &err)
	}
	key, err := s.key(name)
	if err != nil {
		return object{}, fmt.Errorf("store: get: %w", err)
	}
	return s.getObject(ctx, key, name, nil)
}

// getObject reads key within budget (nil: unbounded) and opens it. The
// budget is given back before it returns: the caller keeps the sealed
// bytes only as long as it handles them.
func (s *Store) getObject(ctx context.Context, key, name string, budget *byteBudget) (object, error) {
	sealed, obj, release, err := s.readWithin(ctx, key, name, budget)
	defer release()
	if err != nil {
		return object{}, err
	}
	plain, opened, err := s.open(name, sealed)
	if err != nil {
		return object{}, err
	}
	info := s.info(name, obj)
	info.ID = idOf(opened.Stamp)
	return object{Data: plain, Sealed: sealed, Info: info, Opened: opened}, nil
}

// open opens the sealed bytes of name with the store's sealer, with what
// the envelope learnt about them when the sealer is the store's own. Its
// error is Get's: ErrUnreadable, wrapping the sealer's. Through the
// internal view a kept version opens bound to the name it is a version
// of (its bytes are that object's, ADR 0040 §1).
func (s *Store) open(name string, sealed []byte) ([]byte, envelope.Opened, error) {
	bound := name
	if s.internal {
		bound = boundName(name)
	}
	var (
		plain  []byte
		opened envelope.Opened
		err    error
	)
	if ss, ok := s.c.sealer.(*storeSealer); ok {
		plain, opened, err = ss.openWithInfo(bound, sealed)
	} else {
		plain, err = s.c.sealer.Open(bound, sealed)
	}
	if err != nil {
		return nil, envelope.Opened{}, fmt.Errorf("store: get %q: %w: %w", name, ErrUnreadable, err)
	}
	return plain, opened, nil
}

// StoreID returns the id the store's objects are bound to, 32 hexadecimal
// digits: its manifest's, the id a keyless or recovery-only connection
// found in the manifest's header (not authenticated), or "" for a store
// without a manifest. [ConnectOptions].StoreID pins a store by it.
func (s *Store) StoreID() string {
	if id := s.storeID(); !id.IsZero() {
		return id.String()
	}
	return ""
}

// storeID is storeadmin.StoreID: the id of [Store.StoreID], zero for none.
func (s *Store) storeID() envelope.StoreID {
	if ss, ok := s.c.sealer.(*storeSealer); ok {
		return ss.id
	}
	return envelope.StoreID{}
}
