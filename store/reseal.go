package store

import (
	"context"
	"fmt"

	"github.com/cairnhq/state/internal/envelope"
)

// reseal writes obj's value back sealed to the store's current recipients
// and manifest generation, keeping the epoch and sequence of the write
// that made it (its version id, ADR 0040 §8) and its writer (ADR 0064), conditional on obj's
// version where the storage has conditional writes, and keeping nothing
// in history. obj comes from storeadmin.GetObject on the same view: through
// the internal view a kept version is re-sealed bound to the name it is
// a version of, as it was. It is what a rekey writes: a re-sealed kept
// version must not become newer than its current object (which would
// read as a put-back), nor a re-sealed current object change its id. A
// fenced view's fences admit it as any write.
func (s *Store) reseal(ctx context.Context, obj object) (Info, error) {
	name := obj.Info.Name
	key, err := s.key(name)
	if err != nil {
		return Info{}, fmt.Errorf("store: reseal: %w", err)
	}
	if err := s.checkFences("reseal", name); err != nil {
		return Info{}, err
	}
	bound := name
	if s.internal {
		bound = boundName(name)
	}
	st := obj.Opened.Stamp
	sealed, err := s.sealAs(bound, obj.Data, envelope.Stamp{Epoch: st.Epoch, Sequence: st.Sequence}, obj.Opened.Writer)
	if err != nil {
		return Info{}, fmt.Errorf("store: reseal %q: seal: %w", name, err)
	}
	if int64(len(sealed)) > s.c.maxSize {
		return Info{}, fmt.Errorf("store: reseal %q: %s sealed, over the %s limit: %w", name, mib(int64(len(sealed))), mib(s.c.maxSize), ErrTooLarge)
	}
	var opts PutOptions
	if s.conditionalWrites() {
		opts.IfVersion = obj.Info.Version
	}
	o, err := s.send(ctx, write{op: "reseal", key: key, name: name, sealed: sealed, put: opts})
	if err != nil {
		return Info{}, err
	}
	s.c.metrics.moved(ctx, dirWrite, len(sealed))
	info := s.info(name, o)
	info.ID = idOf(st) // the write's own epoch and sequence, kept
	return info, nil
}
