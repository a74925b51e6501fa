package lock

import "sync/atomic"

// writeSequence numbers the fenced writes of every lock this process
// holds. One counter for the process is a per-holder sequence: a holder's
// writes get strictly increasing numbers (with gaps where other locks of
// the process wrote), and two holders never share an epoch.
var writeSequence atomic.Uint64

// nextWrite is the fence's NextWrite (storeadmin.Fence): it returns the lock's
// fencing epoch and the next number of its write sequence, strictly
// greater than every number returned before, whichever fenced store view
// writes. The store seals both into the authenticated header of the
// object it writes, so that an older version of an object put back in
// place of a newer one can be told by its stamp (docs/adr/0030).
func (l *Lock) nextWrite() (epoch, sequence uint64) {
	return l.Record().Epoch, writeSequence.Add(1)
}
