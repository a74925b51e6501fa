package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/driver"
)

// write is one write request of the store: a put of sealed bytes, or a
// delete when del is set. Every write goes through [Store.send], the one
// place where fences admit it and where conditions are added.
type write struct {
	op        string // "put" or "delete", for errors
	key, name string
	del       bool
	sealed    []byte
	body      io.ReaderAt // instead of sealed: size sealed bytes (stream.go)
	size      int64
	put       PutOptions // the caller's conditions
	ifVersion string     // a delete's condition from the caller
}

func (w write) callerConditional() bool {
	return w.put.IfAbsent || w.put.IfVersion != "" || w.ifVersion != ""
}

// guardAttempts bounds how often a fenced write re-examines an object
// whose version changed under it before giving up with ErrConflict.
const guardAttempts = 3

// send admits w through the fences and sends it. On a fenced view over
// storage with conditional writes, a write without conditions of its own
// is made conditional on the version the view knows (a stat first when it
// knows nothing); a precondition failure is re-examined (the fence checked
// again, the object's version read again) before the write is sent again,
// so that a late write of an earlier holder is overwritten by the holder
// now, never the other way round (docs/adr/0026).
func (s *Store) send(ctx context.Context, w write) (backend.Object, error) {
	ctx, done, err := s.enterFences(ctx, w.op, w.name)
	if err != nil {
		return backend.Object{}, err
	}
	defer done()
	return s.sendEntered(ctx, w)
}

// sendEntered is send for a write the fences already admitted, ctx
// bounded by their deadline (a write that keeps history: one admission
// for all its requests).
func (s *Store) sendEntered(ctx context.Context, w write) (backend.Object, error) {
	var err error
	guard := s.memo != nil && !w.callerConditional() && s.conditionalWrites()
	for attempt := 1; ; attempt++ {
		po := backend.PutOptions{IfAbsent: w.put.IfAbsent, IfVersion: w.put.IfVersion}
		do := backend.DeleteOptions{IfVersion: w.ifVersion}
		if guard {
			v, err := s.knownVersion(ctx, w)
			if err != nil {
				return backend.Object{}, s.fenceWrap(ctx, w.op, w.name, err)
			}
			switch {
			case v == memoAbsent && w.del:
				return backend.Object{}, fmt.Errorf("store: delete %q: %w", w.name, ErrNotFound)
			case v == memoAbsent:
				po.IfAbsent = true
			case w.del:
				do.IfVersion = v
			default:
				po.IfVersion = v
			}
		}
		var obj backend.Object
		switch {
		case w.del:
			err = s.c.b.Delete(ctx, w.key, do)
		case w.body != nil:
			obj, err = driver.PutBody(ctx, s.c.b, w.key, w.body, w.size, po)
		default:
			obj, err = s.c.b.Put(ctx, w.key, w.sealed, po)
		}
		if err == nil {
			if w.del {
				s.memo.set(w.key, memoAbsent)
			} else {
				s.memo.set(w.key, obj.Version)
			}
			return obj, nil
		}
		s.memo.forget(w.key)
		if !guard || !errors.Is(err, backend.ErrPreconditionFailed) {
			return backend.Object{}, s.fenceWrap(ctx, w.op, w.name, err)
		}
		// The object changed since this holder last saw it: a late write
		// of an earlier holder, another writer of this holder, a write
		// from outside. The fence is checked again, and the next round
		// reads the version afresh.
		if ferr := s.checkFences(w.op, w.name); ferr != nil {
			return backend.Object{}, fmt.Errorf("%w (and the object had changed since this holder saw it: %w)", ferr, err)
		}
		if attempt >= guardAttempts {
			return backend.Object{}, fmt.Errorf("store: %s %q: the object kept changing under the fenced write (%d attempts): %w (%w)", w.op, w.name, attempt, ErrConflict, err)
		}
		s.c.log.WarnContext(ctx, "store: an object changed under a held lock; writing on its current version", "name", w.name, "op", w.op)
	}
}

// knownVersion is w's object's version as the view knows it, memoAbsent
// when it knows the object absent, after a stat when it knows nothing. A
// delete always stats an object it knows absent: a stale "absent" would
// send nothing.
func (s *Store) knownVersion(ctx context.Context, w write) (string, error) {
	if v, ok := s.memo.get(w.key); ok && (v != memoAbsent || !w.del) {
		return v, nil
	}
	info, err := s.Stat(ctx, w.name)
	switch {
	case errors.Is(err, ErrNotFound):
		return memoAbsent, nil
	case err != nil:
		return "", err
	}
	return info.Version, nil
}

// memoAbsent is the memo's "known absent".
const memoAbsent = "\x00absent"

// memoLimit bounds a memo; a full memo starts again from nothing (an
// unknown version costs one stat).
const memoLimit = 1 << 14

// versionMemo is what the views fenced by the same fences know of their
// objects' versions, by backend key. A nil memo knows nothing and records
// nothing (unfenced views).
type versionMemo struct {
	mu   sync.Mutex
	m    map[string]string
	hist map[string]histState // what history holds of a key's name (history_write.go)
}

func newVersionMemo() *versionMemo {
	return &versionMemo{m: map[string]string{}, hist: map[string]histState{}}
}

func (m *versionMemo) get(key string) (string, bool) {
	if m == nil {
		return "", false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.m[key]
	return v, ok
}

func (m *versionMemo) set(key, version string) {
	if m == nil || version == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.m) >= memoLimit {
		clear(m.m)
		clear(m.hist)
	}
	m.m[key] = version
}

func (m *versionMemo) forget(key string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, key)
	delete(m.hist, key)
}
