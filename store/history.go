package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/storehook"
)

// DefaultHistory is how many versions of each name history keeps, the
// current one included, when Options.History is zero: the current
// version and the four before it (docs/adr/0040).
const DefaultHistory = 5

// NoHistory, as Options.History (any negative value does), keeps no
// history: overwrites and deletes keep nothing, as before history
// existed, and nothing already kept is removed.
const NoHistory = -1

// The layout of history under the store's reserved prefix (ADR 0040 §1):
// .history/<name>/<E>.<S> is a kept version of <name>, the very sealed
// bytes of the write stamped (E, S); .history/<name>/<E>.<S>.deleted a
// tombstone, <name> deleted by the write stamped (E, S). Who wrote each
// is in its own header (ADR 0064).
const (
	historyDir      = ".history/"
	tombstoneSuffix = ".deleted"
	// maxIDLen is the longest id's text: two 20-digit numbers and a dot.
	maxIDLen = 41
)

// entryName is the internal state name of a version or tombstone of name.
func entryName(name string, id VersionID, deleted bool) string {
	n := historyDir + name + "/" + id.String()
	if deleted {
		n += tombstoneSuffix
	}
	return n
}

// parseEntry splits the internal state name of a history object: a
// version or tombstone of name. ok is false for anything else.
func parseEntry(internal string) (name string, id VersionID, deleted, ok bool) {
	rest, found := strings.CutPrefix(internal, historyDir)
	if !found || strings.HasPrefix(rest, ".") {
		return "", VersionID{}, false, false
	}
	i := strings.LastIndexByte(rest, '/')
	if i <= 0 {
		return "", VersionID{}, false, false
	}
	name, last := rest[:i], rest[i+1:]
	last, deleted = strings.CutSuffix(last, tombstoneSuffix)
	id, err := ParseVersionID(last)
	if err != nil {
		return "", VersionID{}, false, false
	}
	return name, id, deleted, true
}

// boundName is the name an object of the internal view is sealed bound
// to: a kept version, to the name it is a version of (its bytes are that
// object's); everything else, to its own name.
func boundName(internal string) string {
	if name, _, deleted, ok := parseEntry(internal); ok && !deleted {
		return name
	}
	return internal
}

// isHistoryRecord reports an internal state name that is one of
// history's own records — a tombstone — rather than a kept version (which
// is sealed as its object was).
func isHistoryRecord(internal string) bool {
	_, _, deleted, ok := parseEntry(internal)
	return ok && deleted
}

// Version is one version of a state name, as [Store.History] lists it.
type Version struct {
	// ID names the version: the epoch and write sequence of the write
	// that made it.
	ID VersionID
	// Time is when the version was kept (within a request of its write,
	// unless a later write kept it after a crash), on the storage's clock;
	// for a current version not kept yet, its modification time; for a
	// tombstone, when the name was deleted.
	Time time.Time
	// Instance is the instance whose write made the version (for a
	// tombstone, the delete), as the version's own header names it
	// (authenticated, docs/adr/0064); empty for an unfenced write, or
	// where the header does not open.
	Instance string
	// Size is the sealed size in bytes.
	Size int64
	// Current marks the version the name holds now.
	Current bool
	// Deleted marks a tombstone: the name was deleted by the write ID.
	Deleted bool
	// Kept reports that the version is in history (false only for a
	// current version whose keep failed or was cut off: the next write of
	// the name keeps it first).
	Kept bool
}

// Restored is what [Store.Restore] and [Store.Undelete] did.
type Restored struct {
	// From is the version whose value was written again.
	From VersionID
	// Replaced is the version the name held before, now kept; nil when
	// the name had no object (an undelete).
	Replaced *VersionID
	// Written describes the new version (Written.ID names it).
	Written Info
}

// Deleted is a name with kept versions and no current object, as
// [Store.ListDeleted] reports it.
type Deleted struct {
	Name string
	// DeletedAt is when the delete's tombstone was written and By the
	// delete's id; both zero when there is no tombstone (a crash between
	// the delete and its tombstone, or history turned on after).
	DeletedAt time.Time
	By        VersionID
	// Last is the newest kept version: `restore NAME <Last.ID>` brings
	// the value back.
	Last Version
}

// ErrNotDeleted is [Store.Undelete]'s error for a name that has a current
// object: there is nothing to undelete (restore a version instead).
var ErrNotDeleted = errors.New("the name is not deleted")

// appKey is the key of an application name, which has a history
// (reserved names have none), for op's errors.
func (s *Store) appKey(op, name string) (string, error) {
	if err := validateName(name, false); err != nil {
		return "", fmt.Errorf("store: %s: %w", op, err)
	}
	return s.c.prefix + name, nil
}

// historyKeys checks that the history keys of name fit the backend's key
// limit, and returns the key prefix of its entries.
func (s *Store) historyKeys(op, name string) (string, error) {
	dir := s.c.prefix + historyDir + name + "/"
	if n := len(dir) + maxIDLen + len(tombstoneSuffix); n > backend.MaxKeyLen {
		return "", fmt.Errorf("store: %s %q: its history keys would be up to %d bytes, over the %d-byte key limit (a root of %d bytes and a name of %d: shorten either, or turn history off): %w",
			op, name, n, backend.MaxKeyLen, len(s.c.root), len(name), ErrInvalidName)
	}
	return dir, nil
}

// entry is one object of a name's history, as listed.
type entry struct {
	id      VersionID
	deleted bool
	version string // the backend's version of the entry object ("" unknown)
	size    int64
	mod     time.Time
}

// listEntries lists the versions and tombstones of name (its entries'
// key prefix dir), oldest first. Deeper names' entries (name/x's) are
// not among them.
func (s *Store) listEntries(ctx context.Context, name, dir string) ([]entry, error) {
	var out []entry
	err := s.c.b.List(ctx, dir, func(o backend.Object) error {
		last := strings.TrimPrefix(o.Key, dir)
		if strings.Contains(last, "/") {
			return nil
		}
		last, deleted := strings.CutSuffix(last, tombstoneSuffix)
		id, err := ParseVersionID(last)
		if err != nil {
			return nil
		}
		out = append(out, entry{id: id, deleted: deleted, version: o.Version, size: o.Size, mod: o.ModTime})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: history of %q: listing: %w", name, err)
	}
	sortEntries(out)
	return out, nil
}

// sortEntries orders entries oldest first; a tombstone after a version
// of the same id (there is none: ids are unique per write).
func sortEntries(es []entry) {
	slices.SortFunc(es, func(a, b entry) int {
		if c := a.id.Compare(b.id); c != 0 {
			return c
		}
		switch {
		case a.deleted == b.deleted:
			return 0
		case a.deleted:
			return 1
		}
		return -1
	})
}

// peeked is what a header read learnt about an object: whether it
// exists, its backend description, and the id its stamp gives
// (unauthenticated: it names a key, nothing more).
type peeked struct {
	exists bool
	obj    backend.Object
	id     VersionID
	writer envelope.Writer // who the header names, when peek opened it
}

// peek reads the first bytes of key — the fixed part of its header — to
// learn its id and version without reading it whole (ADR 0040 §3): a GET
// whose body is closed after those bytes ([Store.readHeader]). An object
// without an envelope stamp, or stamped by an unfenced write, gets the id
// 0.<its modification time in Unix ms>. With open (History's read of the
// current object), it reads on through the envelope header and opens it,
// for the writer it names: no one where it cannot be read or opened
// (logged at debug level; the id is then the unauthenticated stamp's).
// The version of an object found is recorded in the view's memo; a
// missing object is not recorded as absent here (learnListed does that
// once its listing is made too).
func (s *Store) peek(ctx context.Context, key, name string, open bool) (peeked, error) {
	obj, st, opened, ok, err := s.readHeader(ctx, key, name, open)
	switch {
	case !ok:
		return peeked{}, err // nil for a missing object
	case err != nil && !open:
		return peeked{}, err
	case err != nil:
		s.c.log.DebugContext(ctx, "store: the writer of a version is not known: its header does not open", "object", name, "err", err)
	}
	s.memo.set(key, obj.Version)
	return peeked{exists: true, obj: obj, id: versionIDOf(idOf(st), obj.ModTime), writer: opened.Writer}, nil
}

// versionIDOf is the id a version is kept under: its stamp's (id), or for
// an object stamped by no fence, 0.<mod in Unix milliseconds>.
func versionIDOf(id VersionID, mod time.Time) VersionID {
	if id.Epoch == 0 {
		return VersionID{Sequence: uint64(max(mod.UnixMilli(), 0))}
	}
	return id
}

// History returns every version of name, newest first: the versions and
// tombstones kept under .cairn-state/.history/, and the current object
// (marked Current; listed first and not Kept when it was not kept yet).
// Each version's Instance comes from its own header: History lists the
// name's history and reads the header of the current object and of every
// other entry (a GET closed after the header; the kept copy of the
// current version is the same bytes and is not read again). It fails with
// an error wrapping ErrNotFound when there is neither an object nor
// history. It needs no lock.
func (s *Store) History(ctx context.Context, name string) ([]Version, error) {
	return s.history(ctx, name, true)
}

// history is History; without writers it reads no entry's header and
// names no instance (what Undelete needs).
func (s *Store) history(ctx context.Context, name string, writers bool) ([]Version, error) {
	key, err := s.appKey("history", name)
	if err != nil {
		return nil, err
	}
	if err := s.waitKeeps(ctx, key); err != nil {
		return nil, fmt.Errorf("store: history of %q: waiting for its keep in flight: %w", name, err)
	}
	dir := s.c.prefix + historyDir + name + "/"
	var (
		es         []entry
		cur        peeked
		lerr, perr error
		wg         sync.WaitGroup
	)
	wg.Go(func() { es, lerr = s.listEntries(ctx, name, dir) })
	wg.Go(func() { cur, perr = s.peek(ctx, key, name, writers) })
	wg.Wait()
	if lerr != nil {
		return nil, lerr
	}
	if perr != nil {
		return nil, perr
	}
	if len(es) == 0 && !cur.exists {
		return nil, fmt.Errorf("store: history of %q: no object and no kept version: %w", name, ErrNotFound)
	}
	out := make([]Version, 0, len(es)+1)
	var unread []int // the entries whose header is to be read: out's indexes
	curKept := false
	for _, e := range es {
		v := Version{ID: e.id, Time: e.mod, Size: e.size, Deleted: e.deleted, Kept: true}
		if cur.exists && !e.deleted && e.id == cur.id {
			v.Current, curKept = true, true
			v.Instance = cur.writer.Instance
		} else {
			unread = append(unread, len(out))
		}
		out = append(out, v)
	}
	if cur.exists && !curKept {
		out = append(out, Version{ID: cur.id, Time: cur.obj.ModTime, Size: cur.obj.Size, Current: true, Instance: cur.writer.Instance})
	}
	if writers {
		named := make([]namedVersion, 0, len(unread))
		for _, i := range unread {
			named = append(named, namedVersion{name: name, v: &out[i]})
		}
		s.nameWriters(ctx, named)
	}
	slices.SortStableFunc(out, func(a, b Version) int { return -a.ID.Compare(b.ID) })
	return out, nil
}

// headerReads bounds the header reads one History or ListDeleted has in
// flight.
const headerReads = 8

// namedVersion is a kept version or tombstone of name whose Instance
// nameWriters fills in.
type namedVersion struct {
	name string
	v    *Version
}

// nameWriters fills in the Instance of each entry of vs from the entry's
// own header, up to headerReads at a time.
func (s *Store) nameWriters(ctx context.Context, vs []namedVersion) {
	sem := make(chan struct{}, headerReads)
	var wg sync.WaitGroup
	for _, nv := range vs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			internal := entryName(nv.name, nv.v.ID, nv.v.Deleted)
			nv.v.Instance = s.readWriter(ctx, s.c.prefix+internal, boundName(internal)).Instance
		})
	}
	wg.Wait()
}

// headerSlack is how many bytes past an object's envelope header a header
// read takes too: its age header, which a recovery identity opens it
// through (an X25519 stanza is about 100 bytes, a post-quantum one about
// 1.6 KB). A small object is read whole.
const headerSlack = 4 << 10

// readHeader reads the first bytes of key with a GET whose body is
// closed after them (the backend contract has no ranged read; on the
// state objects this store writes, KiB, it is the same request). Without
// open, those are the fixed part of its header, for the stamp it says,
// unauthenticated (zero for an object without one, no error). With open,
// they are its envelope header and headerSlack more, and the header is
// opened bound to bound ([envelope.Envelope.OpenHeader]): the stamp and
// the writer it names, authenticated; an object that is not an envelope
// or does not open is then an error wrapping ErrUnreadable, beside what
// was read (obj, and the stamp its header says, unauthenticated). A
// missing object is ok false, no error.
func (s *Store) readHeader(ctx context.Context, key, bound string, open bool) (obj backend.Object, st envelope.Stamp, opened envelope.Opened, ok bool, err error) {
	rc, obj, err := s.c.b.Get(ctx, key)
	if errors.Is(err, backend.ErrNotFound) {
		return obj, st, opened, false, nil
	}
	if err != nil {
		return obj, st, opened, false, s.wrap("get", bound, err)
	}
	defer rc.Close()
	head := make([]byte, envelope.FixedHeaderLen)
	n, err := io.ReadFull(rc, head)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return obj, st, opened, true, s.wrap("get", bound, err)
	}
	head = head[:n]
	if !open {
		if st, perr := envelope.PeekStamp(bound, head); perr == nil {
			return obj, st, opened, true, nil
		}
		return obj, envelope.Stamp{}, opened, true, nil
	}
	// The stamp is zero where it cannot be read, and the unauthenticated
	// one beside a malformed layout.
	hl, st, perr := envelope.HeaderLen(bound, head)
	if perr != nil {
		return obj, st, opened, true, fmt.Errorf("store: %q: %w: %w", bound, ErrUnreadable, perr)
	}
	want := int64(hl) + headerSlack
	if obj.Size >= 0 {
		want = min(want, obj.Size)
	}
	if int64(n) < want {
		head = append(head, make([]byte, want-int64(n))...)
		m, err := io.ReadFull(rc, head[n:])
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return obj, st, opened, true, s.wrap("get", bound, err)
		}
		head = head[:n+m]
	}
	ss, isStore := s.c.sealer.(*storeSealer)
	if !isStore {
		return obj, st, opened, true, fmt.Errorf("store: %q: %w: no envelope to open its header with", bound, ErrUnreadable)
	}
	env, err := ss.opener(bound)
	if err == nil {
		opened, err = env.OpenHeader(bound, head, obj.Size)
	}
	if err != nil {
		return obj, st, opened, true, fmt.Errorf("store: %q: %w: %w", bound, ErrUnreadable, err)
	}
	return obj, opened.Stamp, opened, true, nil
}

// readWriter is the writer the header of key (sealed bound to bound)
// names, or no one where it cannot be read or opened (logged at debug
// level: history still lists the version).
func (s *Store) readWriter(ctx context.Context, key, bound string) envelope.Writer {
	_, _, opened, _, err := s.readHeader(ctx, key, bound, true)
	if err != nil {
		s.c.log.DebugContext(ctx, "store: the writer of a version is not known: its header does not open", "object", bound, "err", err)
		return envelope.Writer{}
	}
	return opened.Writer
}

// GetVersion reads and opens one version of name: a kept version (bound
// to name, like the object itself, and checked to carry the stamp its id
// names: an entry whose authenticated stamp is another is misnamed, an
// error wrapping ErrUnreadable naming both), or the current object when
// id is its own. A version that is neither fails with an error wrapping
// ErrNotFound.
func (s *Store) GetVersion(ctx context.Context, name string, id VersionID) ([]byte, Info, error) {
	key, err := s.appKey("get version", name)
	if err != nil {
		return nil, Info{}, err
	}
	if _, err := s.historyKeys("get version", name); err != nil {
		return nil, Info{}, err
	}
	if err := s.waitKeeps(ctx, key); err != nil {
		return nil, Info{}, fmt.Errorf("store: get %q version %s: waiting for its keep in flight: %w", name, id, err)
	}
	en := entryName(name, id, false)
	sealed, obj, err := s.read(ctx, s.c.prefix+en, en)
	if errors.Is(err, ErrNotFound) {
		// The current version, kept or not.
		data, info, cerr := s.get(ctx, key, name)
		if cerr == nil && versionIDOf(info.ID, info.ModTime) == id {
			return data, info, nil
		}
		if cerr != nil && !errors.Is(cerr, ErrNotFound) {
			return nil, Info{}, cerr
		}
		return nil, Info{}, fmt.Errorf("store: get %q version %s: no such version (`cairn-state history %s` lists them): %w", name, id, name, ErrNotFound)
	}
	if err != nil {
		return nil, Info{}, err
	}
	plain, opened, err := s.open(name, sealed)
	if err != nil {
		return nil, Info{}, fmt.Errorf("store: get %q version %s: %w", name, id, err)
	}
	if !sameVersion(id, opened.Stamp) {
		return nil, Info{}, fmt.Errorf("store: get %q version %s: %w: the kept object is version %s (misnamed: someone who can write the storage moved it)", name, id, ErrUnreadable, idOf(opened.Stamp))
	}
	info := Info{Name: name, Size: obj.Size, Version: obj.Version, ModTime: obj.ModTime, Now: obj.Now, ID: idOf(opened.Stamp)}
	return plain, info, nil
}

// sameVersion reports whether an entry named id holds the version whose
// authenticated stamp is st: the same epoch and sequence, or, for the
// versions of unfenced writes (epoch 0, named by time), any unfenced one.
func sameVersion(id VersionID, st envelope.Stamp) bool {
	if id.Epoch == 0 {
		return st.Epoch == 0
	}
	return idOf(st) == id
}

// Restore writes the value of name's version id as a new version of name
// (a new write with a new stamp, through the history path of a fenced
// view: the version it replaces is kept first), never a copy of the old
// bytes back: those carry the old stamp, which is what a put-back looks
// like. A version that is not kept fails as [Store.GetVersion] does. It
// writes as Put does (fences, conditions of the view).
func (s *Store) Restore(ctx context.Context, name string, id VersionID) (Restored, error) {
	return s.restore(ctx, name, id, PutOptions{})
}

func (s *Store) restore(ctx context.Context, name string, id VersionID, opts PutOptions) (Restored, error) {
	data, _, err := s.GetVersion(ctx, name, id)
	if err != nil {
		return Restored{}, err
	}
	key, err := s.appKey("restore", name)
	if err != nil {
		return Restored{}, err
	}
	var res histResult
	written, err := s.putWith(ctx, key, name, data, opts, &res)
	if err != nil {
		return Restored{}, err
	}
	out := Restored{From: id, Written: written}
	if res.replaced != nil {
		r := *res.replaced
		out.Replaced = &r
	}
	return out, nil
}

// Undelete restores the newest kept version of a deleted name, if it is
// still absent (if-absent where the storage has conditional writes). A
// name with a current object fails with [ErrNotDeleted]; one without
// kept versions with an error wrapping ErrNotFound.
func (s *Store) Undelete(ctx context.Context, name string) (Restored, error) {
	vs, err := s.history(ctx, name, false)
	if err != nil {
		return Restored{}, err
	}
	var last *Version
	for i := range vs {
		if vs[i].Current {
			return Restored{}, fmt.Errorf("store: undelete %q: it has a current object (version %s): %w", name, vs[i].ID, ErrNotDeleted)
		}
		if last == nil && !vs[i].Deleted {
			last = &vs[i]
		}
	}
	if last == nil {
		return Restored{}, fmt.Errorf("store: undelete %q: only tombstones are kept: %w", name, ErrNotFound)
	}
	var opts PutOptions
	if s.conditionalWrites() {
		opts.IfAbsent = true
	}
	return s.restore(ctx, name, last.ID, opts)
}

// ListDeleted calls fn for every name under prefix that has kept
// versions and no current object, in lexical order: one listing of the
// history under prefix and one of the objects, then a read of the header
// of each deleted name's last version (who wrote it). An error from fn
// stops it and is returned.
func (s *Store) ListDeleted(ctx context.Context, prefix string, fn func(Deleted) error) error {
	if err := validatePrefix(prefix); err != nil {
		return fmt.Errorf("store: list deleted: %w", err)
	}
	if err := s.waitKeeps(ctx, ""); err != nil {
		return fmt.Errorf("store: list deleted: waiting for the keeps in flight: %w", err)
	}
	type hist struct {
		last *Version
		tomb *entry
	}
	byName := map[string]*hist{}
	var order []string
	var wg sync.WaitGroup
	var herr, lerr error
	live := map[string]bool{}
	wg.Go(func() {
		herr = s.c.b.List(ctx, s.c.prefix+historyDir+prefix, func(o backend.Object) error {
			name, id, deleted, ok := parseEntry(strings.TrimPrefix(o.Key, s.c.prefix))
			if !ok || !strings.HasPrefix(name, prefix) {
				return nil
			}
			h := byName[name]
			if h == nil {
				h = &hist{}
				byName[name] = h
				order = append(order, name)
			}
			e := entry{id: id, deleted: deleted, version: o.Version, size: o.Size, mod: o.ModTime}
			switch {
			case deleted && (h.tomb == nil || id.Compare(h.tomb.id) > 0):
				h.tomb = &e
			case !deleted && (h.last == nil || id.Compare(h.last.ID) > 0):
				h.last = &Version{ID: id, Time: o.ModTime, Size: o.Size, Kept: true}
			}
			return nil
		})
	})
	wg.Go(func() {
		lerr = s.c.b.List(ctx, s.c.prefix+prefix, func(o backend.Object) error {
			if name := strings.TrimPrefix(o.Key, s.c.prefix); !strings.HasPrefix(name, ".") {
				live[name] = true
			}
			return nil
		})
	})
	wg.Wait()
	if herr != nil {
		return fmt.Errorf("store: list deleted %q: %w", prefix, herr)
	}
	if lerr != nil {
		return fmt.Errorf("store: list deleted %q: %w", prefix, lerr)
	}
	slices.Sort(order)
	var found []Deleted
	for _, name := range order {
		h := byName[name]
		if live[name] || h.last == nil {
			continue
		}
		d := Deleted{Name: name, Last: *h.last}
		if h.tomb != nil && h.tomb.id.Compare(h.last.ID) > 0 {
			d.DeletedAt, d.By = h.tomb.mod, h.tomb.id
		}
		found = append(found, d)
	}
	named := make([]namedVersion, len(found))
	for i := range found {
		named[i] = namedVersion{name: found[i].Name, v: &found[i].Last}
	}
	s.nameWriters(ctx, named)
	for _, d := range found {
		if err := fn(d); err != nil {
			return err
		}
	}
	return nil
}

// historyUsage is storeadmin.HistoryUsage: it counts what history holds,
// from one listing of .cairn-state/.history/ (a page per 1,000 objects on
// S3), once the keeps in flight have landed.
func (s *Store) historyUsage(ctx context.Context) (storehook.HistoryUsage, error) {
	if err := s.waitKeeps(ctx, ""); err != nil {
		return storehook.HistoryUsage{}, fmt.Errorf("store: history usage: waiting for the keeps in flight: %w", err)
	}
	var u storehook.HistoryUsage
	names := map[string]bool{}
	err := s.c.b.List(ctx, s.c.prefix+historyDir, func(o backend.Object) error {
		u.Bytes += max(o.Size, 0)
		name, _, deleted, ok := parseEntry(strings.TrimPrefix(o.Key, s.c.prefix))
		if !ok {
			return nil
		}
		names[name] = true
		if deleted {
			u.Tombstones++
		} else {
			u.Versions++
		}
		return nil
	})
	if err != nil {
		return storehook.HistoryUsage{}, fmt.Errorf("store: history usage: %w", err)
	}
	u.Names = len(names)
	return u, nil
}

// Purge removes name and everything history keeps of it — every version
// and tombstone — so that a value can be forgotten on purpose (a leaked
// secret rotated away): the object first, then its entries, each
// conditional on the version listed where the storage has conditional
// writes. It writes as Delete does (a fenced view's fences admit it) and
// returns how many history objects it removed. A name with neither an
// object nor history fails with an error wrapping ErrNotFound.
func (s *Store) Purge(ctx context.Context, name string) (int, error) {
	key, err := s.appKey("purge", name)
	if err != nil {
		return 0, err
	}
	dir, err := s.historyKeys("purge", name)
	if err != nil {
		return 0, err
	}
	if err := s.checkFences("purge", name); err != nil {
		return 0, err
	}
	if err := s.waitKeeps(ctx, key); err != nil {
		return 0, fmt.Errorf("store: purge %q: waiting for its keep in flight: %w", name, err)
	}
	// Whether there is an object is asked, not learnt from the delete:
	// some S3 servers (Garage) answer a delete of a missing key with
	// success.
	_, serr := s.Stat(ctx, name)
	if serr != nil && !errors.Is(serr, ErrNotFound) {
		return 0, serr
	}
	exists := serr == nil
	if exists {
		if _, err := s.send(ctx, write{op: "delete", key: key, name: name, del: true}); err != nil && !errors.Is(err, ErrNotFound) {
			return 0, err
		}
	}
	ctx, done, err := s.enterFences(ctx, "purge", name)
	if err != nil {
		return 0, err
	}
	defer done()
	es, err := s.listEntries(ctx, name, dir)
	if err != nil {
		return 0, s.fenceWrap(ctx, "purge", name, err)
	}
	if !exists && len(es) == 0 {
		return 0, fmt.Errorf("store: purge %q: no object and no kept version: %w", name, ErrNotFound)
	}
	n := 0
	for _, e := range es {
		if err := s.deleteEntry(ctx, dir, e); err != nil {
			return n, s.fenceWrap(ctx, "purge", name, err)
		}
		n++
	}
	s.memo.forget(key)
	return n, nil
}

// deleteEntry deletes one listed history object, conditional on its
// listed version where the storage has conditional writes; one already
// gone is no error.
func (s *Store) deleteEntry(ctx context.Context, dir string, e entry) error {
	var do backend.DeleteOptions
	if s.conditionalWrites() && e.version != "" {
		do.IfVersion = e.version
	}
	key := dir + e.id.String()
	if e.deleted {
		key += tombstoneSuffix
	}
	err := s.c.b.Delete(ctx, key, do)
	if errors.Is(err, backend.ErrNotFound) {
		return nil
	}
	return err
}

// keptVersions returns how many versions of each name a write through a
// fenced view keeps (Options.History resolved); 0 when history is off.
func (s *Store) keptVersions() int { return s.c.history }

// lastKept returns the newest kept content version of name (what `rm`
// tells the user to restore), from one listing of its history; ok is
// false when none is kept.
func (s *Store) lastKept(ctx context.Context, name string) (id VersionID, ok bool, err error) {
	dir, err := s.historyKeys("history", name)
	if err != nil {
		return VersionID{}, false, err
	}
	if err := s.waitKeeps(ctx, s.c.prefix+name); err != nil {
		return VersionID{}, false, err
	}
	es, err := s.listEntries(ctx, name, dir)
	if err != nil {
		return VersionID{}, false, err
	}
	for i := len(es) - 1; i >= 0; i-- {
		if !es[i].deleted {
			return es[i].id, true, nil
		}
	}
	return VersionID{}, false, nil
}
