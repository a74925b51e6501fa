package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// ErrPutBack means a current object is older than a version kept in its
// own history: an older genuine version of it was put back (from a
// backup, an old copy, the bucket's versioning), or a deleted object came
// back (ADR 0040 §9). `cairn-state verify` always reports it; Get
// refuses it under Options.RejectRollback. The error names the object,
// its version and the newer one.
var ErrPutBack = errors.New("object put back: older than a version kept in its history")

// putBackError names a put-back object, its version and the newer one
// its history keeps.
type putBackError struct {
	Name    string
	Current VersionID // the version the object holds
	Newer   VersionID // the newest kept version (or tombstone) newer than it
	Deleted bool      // Newer is a tombstone: the object was deleted after it
}

func (e *putBackError) Error() string {
	if e.Deleted {
		return fmt.Sprintf("store: %q was put back: its version %s is older than its deletion (%s): it was deleted and has come back; cairn-state rm %s removes it again", e.Name, e.Current, e.Newer, e.Name)
	}
	return fmt.Sprintf("store: %q was put back: its version %s is older than kept version %s; cairn-state restore %s %s brings the newer one back", e.Name, e.Current, e.Newer, e.Name, e.Newer)
}

// Is makes a *putBackError match ErrPutBack.
func (e *putBackError) Is(target error) bool { return target == ErrPutBack }

// putBack judges a current object of stamp cur against the newest
// authenticated stamp its history holds (newest; deleted when that one
// is a tombstone): nil when the object is not older. An object written
// unfenced (epoch 0) cannot be ordered and is never reported.
func putBack(name string, cur, newest VersionID, deleted bool) *putBackError {
	if cur.Epoch == 0 || newest.Compare(cur) <= 0 {
		return nil
	}
	return &putBackError{Name: name, Current: cur, Newer: newest, Deleted: deleted}
}

// checkPutBack is Get's check under Options.RejectRollback: the history
// of name is listed, and the entries whose ids are newer than the
// object's are opened, newest first; the first whose authenticated stamp
// is newer refuses the object (an id is only a key, which anyone who can
// write the storage can make up). es is the name's listing.
func (s *Store) checkPutBack(ctx context.Context, name string, cur VersionID, es []entry) error {
	if cur.Epoch == 0 {
		return nil
	}
	dir := s.c.prefix + historyDir + name + "/"
	for _, e := range slices.Backward(es) {
		if e.id.Compare(cur) <= 0 {
			break
		}
		en := entryName(name, e.id, e.deleted)
		sealed, _, err := s.read(ctx, dir+strings.TrimPrefix(en, historyDir+name+"/"), en)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		bound := name
		if e.deleted {
			bound = en
		}
		_, opened, err := s.open(bound, sealed)
		if err != nil {
			s.c.log.WarnContext(ctx, "store: a history entry newer than its object does not open; ignored", "name", name, "entry", e.id.String(), "err", err)
			continue
		}
		if pb := putBack(name, cur, idOf(opened.Stamp), e.deleted); pb != nil {
			return pb
		}
		s.c.log.WarnContext(ctx, "store: a history entry is misnamed (its stamp is older than its key says); ignored", "name", name, "entry", e.id.String(), "stamp", idOf(opened.Stamp).String())
	}
	return nil
}

// strictFor reports whether a read of name is judged against its
// history: under Options.RejectRollback, for application names.
func (s *Store) strictFor(name string) bool {
	return s.c.strict && !strings.HasPrefix(name, ".")
}

// judged runs read (a read and open of name) while name's history is
// listed, then refuses what read returned with a *putBackError when it
// is older than a version kept in that history: Options.RejectRollback's
// check, for Get, GetMany and Update alike.
func (s *Store) judged(ctx context.Context, name string, read func() (Info, error)) error {
	dir, err := s.historyKeys("get", name)
	if err != nil {
		return err
	}
	var (
		es   []entry
		lerr error
		wg   sync.WaitGroup
	)
	wg.Go(func() { es, lerr = s.listEntries(ctx, name, dir) })
	info, err := read()
	wg.Wait()
	if err != nil {
		return err
	}
	if lerr != nil {
		return lerr
	}
	return s.checkPutBack(ctx, name, info.ID, es)
}

// getStrict is Get under Options.RejectRollback: the object's history
// is listed alongside its read, and an object older than a version kept
// in it is refused with a *putBackError.
func (s *Store) getStrict(ctx context.Context, key, name string) ([]byte, Info, error) {
	var (
		data []byte
		info Info
	)
	err := s.judged(ctx, name, func() (Info, error) {
		var err error
		data, info, err = s.get(ctx, key, name)
		return info, err
	})
	if err != nil {
		return nil, Info{}, err
	}
	return data, info, nil
}
