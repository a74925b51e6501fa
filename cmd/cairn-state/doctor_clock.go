package main

import (
	"fmt"
	"time"

	"github.com/cairnhq/state/internal/s3diag"
)

// clockWarnAfter is the offset between the storage's clock and this
// machine's above which doctor warns. S3 dates have one-second resolution,
// so smaller offsets are not worth a word.
const clockWarnAfter = 5 * time.Second

// clockFacts are the clock check's.
type clockFacts struct {
	Endpoint           string    `json:"endpoint,omitempty"`
	Error              string    `json:"error,omitempty"`
	OffsetSeconds      *float64  `json:"offset_seconds,omitempty"`
	UncertaintySeconds *float64  `json:"uncertainty_seconds,omitempty"`
	StorageTime        time.Time `json:"storage_time,omitzero"`
	LocalTime          time.Time `json:"local_time,omitzero"`
}

// checkClocks compares each answering endpoint's clock with this
// machine's; readings is nil when the storage checks stopped before.
func (d *doctor) checkClocks(readings []s3diag.ClockReading) {
	if !d.storage {
		d.skip(checkClock, d.why)
		return
	}
	for _, r := range readings {
		f := &clockFacts{Endpoint: r.Endpoint}
		if r.Err != nil {
			f.Error = r.Err.Error()
			d.add(checkClock, statusWarn, fmt.Sprintf("could not read the clock of %s: %s", r.Endpoint, cause(r.Err)),
				"a key scoped to a prefix may be refused HeadBucket; the lock then judges ages from each response's Date", f)
			continue
		}
		offset, uncertainty := r.Offset.Round(100*time.Millisecond), r.Uncertainty.Round(100*time.Millisecond)
		f.StorageTime, f.LocalTime, f.OffsetSeconds, f.UncertaintySeconds = r.Storage.UTC(), r.Local.UTC(), seconds(offset), seconds(uncertainty)
		dir := "ahead of"
		if r.Offset < 0 {
			dir = "behind"
		}
		finding := fmt.Sprintf("the clock of %s is %s %s this machine's (±%s: S3 dates are whole seconds)", r.Endpoint, offset.Abs(), dir, uncertainty)
		if r.Offset.Abs() < clockWarnAfter {
			d.add(checkClock, statusOK, finding, "", f)
			continue
		}
		d.add(checkClock, statusWarn, finding+"; the lock judges staleness on the storage's clock, so this is safe, but times shown here (heartbeat ages, modification times) are off",
			"synchronise the clocks (NTP) of this machine and the server; past 15 minutes S3 refuses the requests", f)
	}
}
