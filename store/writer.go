package store

import (
	"math"
	"unicode/utf8"

	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/storehook"
)

// writerFor is the writer a write of epoch e through this view names in
// its header (docs/adr/0064): the holder of the view's last fence when
// that fence can say who holds it (a storehook.Holder) and holds epoch e; no one
// otherwise (an unfenced write). Names that do not fit the header's field
// are cut, the host's first.
func (s *Store) writerFor(e uint64) envelope.Writer {
	n := len(s.fences)
	if n == 0 || e == 0 {
		return envelope.Writer{}
	}
	h, ok := s.fences[n-1].(storehook.Holder)
	if !ok {
		return envelope.Writer{}
	}
	hi := h.Holder()
	if hi.Epoch != e {
		return envelope.Writer{}
	}
	w := envelope.Writer{Instance: hi.Instance, Hostname: hi.Hostname}
	if hi.PID > 0 && uint64(hi.PID) <= math.MaxUint32 {
		w.PID = hi.PID
	}
	if over := len(w.Instance) + len(w.Hostname) - envelope.MaxWriterLen; over > 0 {
		w.Hostname = cutUTF8(w.Hostname, max(len(w.Hostname)-over, envelope.MaxWriterLen/4))
		w.Instance = cutUTF8(w.Instance, envelope.MaxWriterLen-len(w.Hostname))
	}
	return w
}

// cutUTF8 is s cut to at most n bytes, at a character boundary.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
