package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/driver"
	"github.com/cairnhq/state/internal/envelope"
)

// keepByPut is the largest sealed object whose keep is a PUT of the very
// bytes just written; a larger one is copied on the server (ADR 0040 §2:
// a COPY costs about a PUT on versitygw and more on Garage for small
// objects, far less on Garage for large ones).
const keepByPut = 32 << 10

// histResult is what a write that keeps history tells its caller.
type histResult struct {
	replaced *VersionID // the version the write replaced; nil: none
	kept     *VersionID // a delete's: the last version, kept
}

// histState is what a fenced view knows of one name's history: its
// current object (its backend version, its id, whether it is kept) and
// its entries, oldest first.
type histState struct {
	exists  bool
	version string
	cur     VersionID
	kept    bool
	entries []entry
}

func (m *versionMemo) histGet(key string) (histState, bool) {
	if m == nil {
		return histState{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.hist[key]
	return h, ok
}

func (m *versionMemo) histSet(key string, h histState) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.hist) >= memoLimit {
		clear(m.hist)
	}
	m.hist[key] = h
}

// keepsHistory reports whether a write of name through this view keeps
// history: an application name, through a fenced application view of a
// connected store (whose objects carry the stamps ids come from), with
// history on. Reserved names, unfenced views and the internal view
// (rekey's re-seals) keep none.
func (s *Store) keepsHistory(name string) bool {
	if s.c.history <= 0 || len(s.fences) == 0 || s.internal || strings.HasPrefix(name, ".") {
		return false
	}
	_, ok := s.c.sealer.(*storeSealer)
	return ok
}

// learn returns what history holds of key's name: from the memo when
// its version is the one the view knows, else from a header read of the
// object and a listing of its entries, concurrently (ADR 0040 §3).
func (s *Store) learn(ctx context.Context, key, name, dir string) (histState, error) {
	if h, ok := s.memo.histGet(key); ok {
		if v, known := s.memo.get(key); known && (v == h.version || (!h.exists && v == memoAbsent)) {
			return h, nil
		}
	}
	return s.learnListed(ctx, key, name, dir, nil)
}

// learnListed is learn from a header read of the object and the listing
// of its entries: listed when it was made already, else made
// concurrently with the header read.
func (s *Store) learnListed(ctx context.Context, key, name, dir string, listed *[]entry) (histState, error) {
	var (
		cur        peeked
		es         []entry
		perr, lerr error
		wg         sync.WaitGroup
	)
	wg.Go(func() { cur, perr = s.peek(ctx, key, name, false) })
	if listed == nil {
		wg.Go(func() { es, lerr = s.listEntries(ctx, name, dir) })
	} else {
		es = *listed
	}
	wg.Wait()
	if perr != nil {
		return histState{}, perr
	}
	if lerr != nil {
		return histState{}, lerr
	}
	if !cur.exists {
		s.memo.set(key, memoAbsent)
	}
	h := histState{exists: cur.exists, version: cur.obj.Version, cur: cur.id, entries: es}
	for _, e := range es {
		if !e.deleted && e.id == cur.id {
			h.kept = true
		}
	}
	return h, nil
}

// putOnListing is the first write of a name in a holding without a read
// of the current object's header (ADR 0055): where the storage enforces
// conditions and names an object's bytes by their MD5 (an S3 ETag of a
// single-part object), the name's history is listed and w is sent
// conditional on what the listing implies — absent when the newest
// entry is a tombstone or there is none, else the version of the newest
// kept entry, which the current object has only if it is those very
// bytes, that is, if it is kept. The storage checks the guess: sent is
// false (nothing written) when the guess was wrong or not made, and the
// caller learns the object as before (header read ∥ listing, repair),
// from the listing made here when there was no guess to make (listed).
func (s *Store) putOnListing(ctx context.Context, key, name, dir string, w write) (obj backend.Object, h histState, sent bool, listed *[]entry, err error) {
	if w.callerConditional() || s.memo == nil || !s.conditionalWrites() {
		return obj, h, false, nil, nil
	}
	if _, known := s.memo.histGet(key); known {
		return obj, h, false, nil, nil // the memo decides, as in learn
	}
	es, err := s.listEntries(ctx, name, dir)
	if err != nil {
		return obj, h, false, nil, s.fenceWrap(ctx, "put", name, err)
	}
	h = histState{entries: es}
	g := w
	switch {
	case len(es) == 0 || es[len(es)-1].deleted:
		g.put.IfAbsent = true
	case contentVersion(es[len(es)-1].version):
		newest := es[len(es)-1]
		h.exists, h.version, h.cur, h.kept = true, newest.version, newest.id, true
		g.put.IfVersion = newest.version
	default:
		return obj, h, false, &es, nil
	}
	obj, err = s.sendEntered(ctx, g)
	switch {
	case err == nil:
		s.memo.histSet(key, h)
		return obj, h, true, nil, nil
	case errors.Is(err, backend.ErrPreconditionFailed):
		// Not what the listing implied (an object not kept: a crash
		// between a write and its keep, a late write of an earlier
		// holder, a write from outside): the fence is checked again, as
		// after any changed version (sendEntered), then the object is
		// learned and repaired the long way.
		s.memo.forget(key)
		if ferr := s.checkFences("put", name); ferr != nil {
			return obj, h, false, nil, fmt.Errorf("%w (and the object was not what its history showed: %w)", ferr, err)
		}
		return obj, histState{}, false, nil, nil
	}
	return obj, h, false, nil, err
}

// contentVersion reports whether a backend version is an S3 ETag of a
// single-part object: a quoted MD5 of its bytes, equal for equal bytes.
func contentVersion(v string) bool {
	if len(v) != 34 || v[0] != '"' || v[33] != '"' {
		return false
	}
	for _, c := range v[1:33] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// copyEntry copies key's object, version v, to the entry dst on the
// server, conditional on v where the storage enforces it; where it
// cannot (a server found ignoring the condition, conditional=off), the
// copy is unconditional: a write of key racing it can then be kept under
// v's id, which verify reports as a misnamed entry (ADR 0040 §2).
func (s *Store) copyEntry(ctx context.Context, key, dst, v string) (backend.Object, error) {
	var co backend.CopyOptions
	if s.c.b.Capabilities().CopySourceConditions {
		co.IfSourceVersion = v
	}
	return driver.Copy(ctx, s.c.b, key, dst, co)
}

// repair keeps the current object of h under its own id when it is not
// kept yet (a crash between a write and its keep, history turned on
// since, a writer outside the lock): an unkept version is never
// overwritten or deleted.
func (s *Store) repair(ctx context.Context, key, name, dir string, h *histState) error {
	if !h.exists || h.kept {
		return nil
	}
	var obj backend.Object
	err := s.c.metrics.timed(ctx, opKeep, func() (err error) {
		obj, err = s.copyEntry(ctx, key, dir+h.cur.String(), h.version)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: keep %q version %s in history before replacing it: %w", name, h.cur, err)
	}
	h.entries = append(h.entries, entry{id: h.cur, version: obj.Version, size: obj.Size, mod: obj.ModTime})
	sortEntries(h.entries)
	h.kept = true
	s.c.log.InfoContext(ctx, "store: kept a version that was not in history", "name", name, "version", h.cur.String())
	return nil
}

// putKept is the write w (sealed bytes in w.sealed, or w.size of them in
// w.body, stamped stamp) that keeps history (ADR 0040 §2): wait for the
// name's keeps in flight, learn the current object, keep it if it is not
// kept, write — and return: the keep of what was written and the prune
// beyond the retention go on behind the write, under the same admission
// by the fences (ADR 0065).
func (s *Store) putKept(ctx context.Context, w write, stamp envelope.Stamp, res *histResult) (Info, error) {
	key, name := w.key, w.name
	size := int64(len(w.sealed))
	if w.body != nil {
		size = w.size
	}
	dir, err := s.historyKeys("put", name)
	if err != nil {
		return Info{}, err
	}
	if err := s.waitKeeps(ctx, key); err != nil {
		return Info{}, fmt.Errorf("store: put %q: waiting for its keep in flight: %w", name, err)
	}
	callerCtx := ctx
	ctx, done, err := s.enterFences(ctx, "put", name)
	if err != nil {
		return Info{}, err
	}
	handed := false
	defer func() {
		if !handed {
			done()
		}
	}()
	obj, h, sent, listed, err := s.putOnListing(ctx, key, name, dir, w)
	if err != nil {
		return Info{}, err
	}
	if !sent {
		if listed != nil {
			h, err = s.learnListed(ctx, key, name, dir, listed)
		} else {
			h, err = s.learn(ctx, key, name, dir)
		}
		if err != nil {
			return Info{}, s.fenceWrap(ctx, "put", name, err)
		}
		if err := s.repair(ctx, key, name, dir, &h); err != nil {
			s.memo.forget(key)
			return Info{}, s.fenceWrap(ctx, "put", name, err)
		}
		s.memo.histSet(key, h)
		if obj, err = s.sendEntered(ctx, w); err != nil {
			return Info{}, err
		}
	}
	s.c.metrics.moved(ctx, dirWrite, int(size))
	if res != nil && h.exists {
		r := h.cur
		res.replaced = &r
	}
	// What the keep needs of w is taken now: a streamed value's bytes
	// (its spool is the caller's to remove once this returns).
	var readErr error
	if w.body != nil && size <= keepByPut {
		w.sealed, readErr = readBack(w.body, size)
		w.body = nil
	}
	handed = true
	s.keepBehind(callerCtx, key, done, func(ctx context.Context) {
		s.keepWritten(ctx, w, obj, idOf(stamp), size, dir, h.entries, readErr)
	})
	return s.info(name, obj), nil
}

// keepWritten keeps the version w wrote (obj, id) and prunes the name's
// entries es beyond the retention, then records what the name's history
// holds (readErr: the written bytes could not be read back for a keep by
// PUT). The prune runs beside the keep, unless it deletes every entry the
// name has: then it waits for the keep to land, so that the history
// folder never loses its last object while the keep is being written
// into it (versitygw's posix backend removes a folder with its last
// object, and a keep racing that removal failed with 409
// ExistingObjectIsDirectory), and a keep that failed prunes nothing. A
// keep that fails is logged: the next write of the name repairs it.
func (s *Store) keepWritten(ctx context.Context, w write, obj backend.Object, id VersionID, size int64, dir string, es []entry, readErr error) {
	key, name := w.key, w.name
	var (
		kept    backend.Object
		keepErr error
	)
	keep := func() {
		keepErr = s.c.metrics.timed(ctx, opKeep, func() (err error) {
			switch {
			case readErr != nil:
				err = readErr
			case size <= keepByPut:
				kept, err = s.c.b.Put(ctx, dir+id.String(), w.sealed, backend.PutOptions{})
			default:
				kept, err = s.copyEntry(ctx, key, dir+id.String(), obj.Version)
			}
			return err
		})
	}
	remaining, gone := s.pruned(es, 1)
	if len(remaining) == 0 && len(gone) > 0 {
		keep()
		if keepErr != nil {
			remaining = es
		} else {
			s.prune(ctx, name, dir, gone)
		}
	} else {
		var wg sync.WaitGroup
		wg.Go(keep)
		s.prune(ctx, name, dir, gone)
		wg.Wait()
	}
	next := histState{exists: true, version: obj.Version, cur: id, entries: remaining}
	if keepErr != nil {
		s.c.log.WarnContext(ctx, "store: written but not kept in history (the next write of the name keeps it first)", "name", name, "version", id.String(), "err", s.fenceWrap(ctx, "keep", name, keepErr))
	} else {
		if kept.Size < 0 {
			kept.Size = size
		}
		next.kept = true
		next.entries = append(next.entries, entry{id: id, version: kept.Version, size: kept.Size, mod: kept.ModTime})
	}
	s.memo.histSet(key, next)
}

// readBack reads the size sealed bytes of a streamed write back from its
// spool, for a keep by PUT of the very bytes written (ADR 0040).
func readBack(body io.ReaderAt, size int64) ([]byte, error) {
	sealed := make([]byte, size)
	// ReadAt returns an error whenever it reads fewer bytes than asked
	// (io.EOF at most alongside a full read): the count decides.
	if n, err := body.ReadAt(sealed, 0); n < len(sealed) {
		return nil, fmt.Errorf("read the written bytes back: %d of %d bytes: %w", n, len(sealed), err)
	}
	return sealed, nil
}

// deleteKept is the delete that keeps history: the current object kept
// if it is not, the delete, then a tombstone stamped by a write of its
// own (after the delete: a tombstone without its delete would make the
// live object look put back).
func (s *Store) deleteKept(ctx context.Context, key, name string, opts DeleteOptions) (histResult, error) {
	dir, err := s.historyKeys("delete", name)
	if err != nil {
		return histResult{}, err
	}
	if err := s.checkFences("delete", name); err != nil {
		return histResult{}, err
	}
	if err := s.waitKeeps(ctx, key); err != nil {
		return histResult{}, fmt.Errorf("store: delete %q: waiting for its keep in flight: %w", name, err)
	}
	ctx, done, err := s.enterFences(ctx, "delete", name)
	if err != nil {
		return histResult{}, err
	}
	defer done()
	h, err := s.learn(ctx, key, name, dir)
	if err != nil {
		return histResult{}, s.fenceWrap(ctx, "delete", name, err)
	}
	if !h.exists {
		s.memo.histSet(key, h)
		return histResult{}, fmt.Errorf("store: delete %q: %w", name, ErrNotFound)
	}
	if err := s.repair(ctx, key, name, dir, &h); err != nil {
		s.memo.forget(key)
		return histResult{}, s.fenceWrap(ctx, "delete", name, err)
	}
	s.memo.histSet(key, h)
	if _, err := s.sendEntered(ctx, write{op: "delete", key: key, name: name, del: true, ifVersion: opts.IfVersion}); err != nil {
		return histResult{}, err
	}
	last := h.cur
	res := histResult{kept: &last}
	next := histState{entries: h.entries}
	f := s.fences[len(s.fences)-1]
	e, q := f.NextWrite()
	tid := VersionID{Epoch: e, Sequence: q}
	tname := entryName(name, tid, true)
	sealed, err := s.sealAs(tname, nil, envelope.Stamp{Epoch: e, Sequence: q}, s.writerFor(e))
	if err == nil {
		var po backend.PutOptions
		if s.conditionalWrites() {
			po.IfAbsent = true
		}
		var obj backend.Object
		if obj, err = s.c.b.Put(ctx, s.c.prefix+tname, sealed, po); err == nil {
			next.entries = append(next.entries, entry{id: tid, deleted: true, version: obj.Version, size: obj.Size, mod: obj.ModTime})
		}
	}
	if err != nil {
		s.c.log.WarnContext(ctx, "store: deleted, but its tombstone was not written", "name", name, "err", s.fenceWrap(ctx, "tombstone", name, err))
	}
	s.memo.histSet(key, next)
	return res, nil
}

// sealAs seals data bound to name with the given epoch, sequence and
// writer, under the store's current manifest generation: what a tombstone
// (whose name holds its own id) and a re-seal (which keeps the version's
// id and writer) need.
func (s *Store) sealAs(name string, data []byte, st envelope.Stamp, w envelope.Writer) ([]byte, error) {
	ss, ok := s.c.sealer.(*storeSealer)
	switch {
	case !ok:
		return s.c.sealer.Seal(name, data)
	case ss.readOnly:
		return nil, fmt.Errorf("seal %q: %w", name, ErrNoManifest)
	case ss.env == nil:
		return nil, fmt.Errorf("seal %q: %w", name, errNoKey)
	}
	st.Generation = ss.generation()
	return ss.env.SealStamped(name, data, st, w)
}

// pruned splits es (the name's entries before this write, oldest first)
// into what the retention keeps and what goes, counting adding versions
// about to be kept: the oldest content versions go, and the tombstones
// older than the oldest version that stays.
func (s *Store) pruned(es []entry, adding int) (keep, gone []entry) {
	contents := adding
	for _, e := range es {
		if !e.deleted {
			contents++
		}
	}
	drop := contents - s.c.history
	if drop <= 0 {
		return es, nil
	}
	// The oldest drop content versions go, and every tombstone older
	// than the oldest content version that stays (the one being kept
	// when none of es stays).
	var oldest *VersionID
	for _, e := range es {
		switch {
		case !e.deleted && drop > 0:
			gone = append(gone, e)
			drop--
		case !e.deleted && oldest == nil:
			id := e.id
			oldest = &id
		}
	}
	for _, e := range es {
		switch {
		case slices.ContainsFunc(gone, func(g entry) bool { return g.id == e.id && !g.deleted && !e.deleted }):
		case e.deleted && (oldest == nil || e.id.Compare(*oldest) < 0):
			gone = append(gone, e)
		default:
			keep = append(keep, e)
		}
	}
	return keep, gone
}

// prune deletes the entries gone of name's history. A failed delete is
// logged; the next write prunes it again.
func (s *Store) prune(ctx context.Context, name, dir string, gone []entry) {
	for _, e := range gone {
		if err := s.c.metrics.timed(ctx, opPrune, func() error { return s.deleteEntry(ctx, dir, e) }); err != nil {
			s.c.log.WarnContext(ctx, "store: history not pruned", "name", name, "version", e.id.String(), "err", err)
		}
	}
}
