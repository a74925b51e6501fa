package lock

import "github.com/cairnhq/state/internal/storeadmin"

// holder says who holds the lock (storeadmin.Holder): the instance, host,
// process and epoch of this acquisition, which a store view fenced by the
// lock seals into every object it writes as its writer.
func (l *Lock) holder() storeadmin.HolderInfo {
	r := l.Record()
	return storeadmin.HolderInfo{Instance: r.InstanceID, Hostname: r.Hostname, PID: r.PID, Epoch: r.Epoch}
}
