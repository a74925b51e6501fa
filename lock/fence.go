package lock

import (
	"time"

	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/store"
)

// Fence returns a view of st whose writes the lock fences (docs/adr/0026):
// refused with an error wrapping store.ErrFenced and [Lock.Err]'s error
// while the lock is suspended, and for good once it is lost or released;
// each bounded by the lease's end and, where the storage has conditional
// writes, conditional on the version of the object the view knows, so
// that a write delivered late cannot replace the next holder's; and
// waited for by [Lock.Release] before it deletes the lock. Every object
// written through the view carries the lock's epoch and a write sequence
// in its authenticated header. Reads are unaffected. st is the store the
// lock was acquired on (or another view of it); the lock itself writes
// through the unfenced store.
func (l *Lock) Fence(st *store.Store) *store.Store { return storeadmin.WithFence(st, fence{l}) }

// fence is the lock as a store's fence that can say who holds it
// (storeadmin.Holder). A value, so that two fences of one lock are
// equal.
type fence struct{ l *Lock }

var _ storeadmin.Holder = fence{}

func (f fence) Err() error                          { return f.l.Err() }
func (f fence) Deadline() (time.Time, bool)         { return f.l.deadline() }
func (f fence) Enter() (done func(), err error)     { return f.l.enter() }
func (f fence) NextWrite() (epoch, sequence uint64) { return f.l.nextWrite() }
func (f fence) Holder() storeadmin.HolderInfo       { return f.l.holder() }
