package lock

import "github.com/cairnhq/state/internal/storeadmin"

// holder says who holds the lock, for the writer records of the store's
// history (storeadmin.Holder): the instance, host, process and epoch of this
// acquisition.
func (l *Lock) holder() storeadmin.HolderInfo {
	r := l.Record()
	return storeadmin.HolderInfo{Instance: r.InstanceID, Hostname: r.Hostname, PID: r.PID, Epoch: r.Epoch, Acquired: r.AcquiredAt}
}
