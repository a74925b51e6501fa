package storehook

import (
	"filippo.io/age"

	"github.com/cairnhq/state/internal/envelope"
)

// Object is one object read whole and opened, with its sealed bytes and
// what the envelope learnt opening it: what verify and rekey need
// (storeadmin.GetObject). I is store.Info.
type Object[I any] struct {
	// Data is the opened value.
	Data []byte
	// Sealed are the stored bytes.
	Sealed []byte
	// Info describes the stored object.
	Info I
	// Opened is what the envelope learnt while opening it (store id,
	// stamp, whether it was sealed to the store's recipient set, whether
	// it was opened through a recovery identity). It is zero for a store
	// opened with a Sealer other than a connected store's.
	Opened envelope.Opened
}

// VerifyOptions configure storeadmin.Verify. The zero value means the
// defaults. M is store.ManyOptions.
type VerifyOptions[M any] struct {
	// Many bound the reads: how many at once, how many sealed bytes in
	// flight.
	Many M
	// Recovery, when set, are identities every object is also read with by
	// the stock age parser (envelope.Recover), whole, as an operator would
	// without this library: the proof that the recovery promise holds.
	Recovery []age.Identity
}

// Check is verify's verdict on one object. I is store.Info.
type Check[I any] struct {
	Name string
	Info I
	// Err says why the object does not open (naming it); nil when it
	// opens.
	Err error
	// Opened is what the envelope learnt, when it opens: its stamp
	// included.
	Opened envelope.Opened
	// OutsideSet reports an object sealed to another recipient set
	// than the store's manifest records: some identity the store lists may
	// not open it, or one it no longer lists may. A rekey re-seals it.
	OutsideSet bool
	// RecoveryChecked reports that VerifyOptions.Recovery was tried;
	// RecoveryErr is stock age's verdict (nil: it read the whole object).
	RecoveryChecked bool
	RecoveryErr     error
	// PutBack reports a current object older than a version (or a
	// tombstone) kept in its own history, naming both: an older genuine
	// version put back, or a deleted object come back (an error matching
	// store.ErrPutBack; storeadmin.PutBackOf reads its versions).
	PutBack error
}

// Problem reports whether the check found anything to act on: the
// object does not open (an object sealed under a newer manifest
// generation than the store's, store.ErrRolledBack, included), is outside
// the store's set, opened only through a recovery identity, failed the
// recovery check, or was put back.
func (c Check[I]) Problem() bool {
	return c.Err != nil || c.OutsideSet || c.Opened.Unauthenticated || c.RecoveryErr != nil || c.PutBack != nil
}

// HistoryUsage is what history holds, from one listing
// (storeadmin.HistoryUsage).
type HistoryUsage struct {
	Names      int   // names with at least one kept version or tombstone
	Versions   int   // kept versions
	Tombstones int   // tombstones
	Bytes      int64 // the sealed bytes of all of them
}
