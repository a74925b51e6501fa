package lock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/store"
)

// EpochName is the reserved state name of the saved fencing epoch: the
// store keeps it at <root>/.cairn-state/.lock-epoch, sealed like every other
// object. [Lock.Release] and [Break] write the epoch of the lock they remove
// there just before deleting the lock object, and [Acquire] reads it when it
// finds no readable lock object, so that the epoch keeps growing across
// graceful releases. It is a small record that outlives every lock. Tools
// that verify every object check it like any other; tools that re-seal
// every object under the lock may skip it, as they skip [Name]: releasing
// their own lock rewrites it with their sealer.
const EpochName = ".lock-epoch"

// epochRecord is what the epoch object holds.
type epochRecord struct {
	// Epoch is the highest epoch of a lock removed from the store.
	Epoch uint64 `json:"epoch"`
	// InstanceID and AcquisitionID name the lock it was saved from;
	// informational.
	InstanceID    string `json:"instance_id,omitempty"`
	AcquisitionID string `json:"acquisition_id,omitempty"`
	// SavedAt is when it was saved, on the saver's clock; informational.
	SavedAt time.Time `json:"saved_at"`
}

// errMalformedEpoch marks an epoch object that opened but is not an epoch
// record.
var errMalformedEpoch = errors.New("not a lock epoch record")

func (r epochRecord) encode() ([]byte, error) { return json.Marshal(r) }

// decodeEpoch parses the opened epoch object. Anything but a JSON object
// with an epoch of at least 1 is an error wrapping errMalformedEpoch.
func decodeEpoch(data []byte) (epochRecord, error) {
	var r epochRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return epochRecord{}, fmt.Errorf("%w: %w", errMalformedEpoch, err)
	}
	if r.Epoch == 0 {
		return epochRecord{}, fmt.Errorf("%w: epoch missing or zero", errMalformedEpoch)
	}
	return r, nil
}

// savedEpoch is what one look at the epoch object found.
type savedEpoch struct {
	epoch   uint64 // zero when absent or unreadable
	present bool
	version string // when present
}

// readEpoch reads the saved epoch. An object that exists but does not open
// or decode is logged as a warning and counts as epoch zero: a damaged
// epoch object must never brick a boot. Only a storage that fails to answer
// is an error.
func readEpoch(ctx context.Context, st *store.Store, log *slog.Logger) (savedEpoch, error) {
	obj, err := readObject(ctx, st, EpochName)
	if err != nil {
		return savedEpoch{}, err
	}
	if !obj.present {
		return savedEpoch{}, nil
	}
	s := savedEpoch{present: true, version: obj.info.Version}
	why := obj.why
	if why == nil {
		r, derr := decodeEpoch(obj.data)
		if derr == nil {
			s.epoch = r.Epoch
			return s, nil
		}
		why = fmt.Errorf("epoch object %s: %w", EpochName, derr)
	}
	log.Warn("saved lock epoch is unreadable; counting from what the lock object shows", "err", why)
	return s, nil
}

// saveAttempts bounds how often saveEpoch re-reads after a conflict.
const saveAttempts = 4

// saveEpoch records rec's epoch in the epoch object unless it already holds
// that epoch or a higher one. With conditional writes the write is
// compare-and-swap against the version read (or against known, the version
// the acquisition read, which spares the read when nothing wrote since), so
// two savers never lower it.
func saveEpoch(ctx context.Context, st *store.Store, rec Record, known *savedEpoch, log *slog.Logger) error {
	cas := st.ConditionalWrites()
	var lastErr error
	for attempt := 0; attempt < saveAttempts; attempt++ {
		var cur savedEpoch
		if attempt == 0 && known != nil && cas {
			cur = *known
		} else {
			var err error
			if cur, err = readEpoch(ctx, st, log); err != nil {
				return err
			}
		}
		if cur.epoch >= rec.Epoch {
			return nil
		}
		data, err := epochRecord{Epoch: rec.Epoch, InstanceID: rec.InstanceID, AcquisitionID: rec.AcquisitionID, SavedAt: time.Now().UTC()}.encode()
		if err != nil {
			return err
		}
		var po store.PutOptions
		if cas {
			if cur.present {
				po.IfVersion = cur.version
			} else {
				po.IfAbsent = true
			}
		}
		_, err = st.Put(ctx, EpochName, data, po)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, backend.ErrPreconditionFailed):
			lastErr = err // written meanwhile, or our write landed: look again
		default:
			return fmt.Errorf("save epoch %d in %s: %w", rec.Epoch, EpochName, err)
		}
	}
	return fmt.Errorf("save epoch %d in %s: gave up after %d attempts: %w", rec.Epoch, EpochName, saveAttempts, lastErr)
}
