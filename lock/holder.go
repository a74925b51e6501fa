package lock

import "github.com/cairnhq/state/store"

// holder says who holds the lock, for the writer records of the store's
// history (store.Holder): the instance, host, process and epoch of this
// acquisition.
func (l *Lock) holder() store.HolderInfo {
	r := l.Record()
	return store.HolderInfo{Instance: r.InstanceID, Hostname: r.Hostname, PID: r.PID, Epoch: r.Epoch, Acquired: r.AcquiredAt}
}
