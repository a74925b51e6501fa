package lock

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cairnhq/state/internal/storemeta"
)

// lockName is the reserved state name of the lock object of
// compare-and-swap mode: the store keeps it at <root>/.cairn-state/.lock,
// sealed like every other object.
const lockName = storemeta.LockName

// The other reserved names of the lock, all below listPrefix so that one
// listing sees every lock object (docs/adr/0019, 0020).
const (
	// listPrefix is the state-name prefix of every object the lock owns:
	// [lockName], and the claims and epoch markers under ".lock.d/".
	listPrefix = ".lock"
	// dirName holds the claims (claims mode) and the epoch markers (both
	// modes).
	dirName = ".lock.d/"

	claimPrefix  = dirName + "claim-"
	markerPrefix = dirName + "epoch-"
	intentSuffix = "-1-intent"
	heldSuffix   = "-2-held"
)

// owns reports whether name (a state name, as store.List reports it) is
// one of the lock's own objects: the lock object, a claim or an epoch
// marker (internal/lockadmin.Owns).
func owns(name string) bool {
	return name == lockName || strings.HasPrefix(name, dirName)
}

// kind is what a name under listPrefix is.
type kind int

const (
	kindUnknown kind = iota // under .lock.d/ but not a name the lock writes
	kindLock                // .lock
	kindIntent              // .lock.d/claim-<acq>-1-intent
	kindHeld                // .lock.d/claim-<acq>-2-held
	kindMarker              // .lock.d/epoch-<20 digits>
	kindOther               // under the list prefix but not the lock's (".locksmith")
)

func (k kind) String() string {
	switch k {
	case kindLock:
		return "lock"
	case kindIntent:
		return "intent claim"
	case kindHeld:
		return "held claim"
	case kindMarker:
		return "epoch marker"
	case kindOther:
		return "other"
	}
	return "unknown lock object"
}

func intentName(acq string) string { return claimPrefix + acq + intentSuffix }
func heldName(acq string) string   { return claimPrefix + acq + heldSuffix }

// markerDigits is the width of an epoch marker's number: 2^64−1 has 20
// decimal digits, so markers sort in numeric order.
const markerDigits = 20

func markerName(epoch uint64) string { return fmt.Sprintf("%s%0*d", markerPrefix, markerDigits, epoch) }

// parseName classifies a state name found under listPrefix: its kind, the
// acquisition id of a claim, the epoch of a marker. Names the lock does not
// write are kindUnknown (under .lock.d/) or kindOther.
func parseName(name string) (k kind, acq string, epoch uint64) {
	switch {
	case name == lockName:
		return kindLock, "", 0
	case !strings.HasPrefix(name, dirName):
		return kindOther, "", 0
	case strings.HasPrefix(name, markerPrefix):
		digits := strings.TrimPrefix(name, markerPrefix)
		if len(digits) != markerDigits {
			return kindUnknown, "", 0
		}
		n, err := strconv.ParseUint(digits, 10, 64)
		if err != nil || n == 0 {
			return kindUnknown, "", 0
		}
		return kindMarker, "", n
	case strings.HasPrefix(name, claimPrefix):
		rest := strings.TrimPrefix(name, claimPrefix)
		for _, c := range []struct {
			suffix string
			k      kind
		}{{intentSuffix, kindIntent}, {heldSuffix, kindHeld}} {
			if acq, ok := strings.CutSuffix(rest, c.suffix); ok && validAcquisitionID(acq) {
				return c.k, acq, 0
			}
		}
	}
	return kindUnknown, "", 0
}

// validAcquisitionID accepts what uuid.NewString produces: 36 characters
// of lower-case hex and dashes.
func validAcquisitionID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, r := range s {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if r != '-' {
				return false
			}
		case (r < '0' || r > '9') && (r < 'a' || r > 'f'):
			return false
		}
	}
	return true
}
