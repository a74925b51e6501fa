package main

import (
	"errors"
	"fmt"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/s3"
	"github.com/cairnhq/state/internal/s3diag"
	"github.com/cairnhq/state/lock"
)

// probeFacts are the conditional-writes check's on S3.
type probeFacts struct {
	Conditional      string `json:"conditional,omitempty"` // the URL's mode
	Error            string `json:"error,omitempty"`
	ProbePrefix      string `json:"probe_prefix,omitempty"`
	PutConditions    *bool  `json:"put_conditions,omitempty"`
	DeleteConditions *bool  `json:"delete_conditions,omitempty"`
	Evidence         string `json:"evidence,omitempty"`
}

// lockModeFacts are a lock mode and what it was decided from.
type lockModeFacts struct {
	Evidence string `json:"evidence,omitempty"`
	LockMode string `json:"lock_mode,omitempty"`
}

// checkConditionalWrites reports the conditional-write probe (it wrote and
// removed a throwaway object under the reserved prefix) and the lock mode
// the finding, or the URL, implies; nil when the probe did not run.
func (d *doctor) checkConditionalWrites(p *s3diag.ProbeCheck) {
	if p == nil {
		d.skipAll(d.why, checkConditional, checkLockMode)
		return
	}
	mode := d.s3.opts.Conditional
	prefix := reservedPrefix(d.root)
	d.lockMode = lock.Mode(p.LockMode)
	if err := p.Err; err != nil {
		fe := &probeFacts{ProbePrefix: prefix, Conditional: string(mode), Error: err.Error()}
		switch {
		case errors.Is(err, backend.ErrPermission):
			d.add(checkConditional, statusWarn, fmt.Sprintf("the credentials may not write under %s: %s", prefix, cause(err)),
				"reads work (ls, get, lock status); writes (put, rm, rekey) and the application's lock need a key allowed to write there", fe)
		case p.Unanswered:
			d.add(checkConditional, statusFail, "the storage stopped answering during the probe: "+cause(err), "see the endpoint lines above; raise --timeout for a slow link", fe)
			d.storage, d.why = false, "the storage stopped answering"
		default:
			d.add(checkConditional, statusFail, "the probe failed: "+cause(err), "see the server's message", fe)
		}
		if d.lockMode == "" {
			d.skip(checkLockMode, "the probe did not finish")
		} else {
			d.add(checkLockMode, statusOK, lockModeText(d.lockMode, p.LockModeWhy), "", &lockModeFacts{LockMode: p.LockMode})
		}
		return
	}
	res := p.Result
	fe := &probeFacts{ProbePrefix: prefix, Conditional: string(mode), PutConditions: &res.PutConditions,
		DeleteConditions: &res.DeleteConditions, Evidence: res.Evidence}
	wrote := fmt.Sprintf(" (a probe object was written and removed under %s)", prefix)
	switch {
	case mode == s3.ConditionalOn && !res.Supported:
		d.add(checkConditional, statusFail, "conditional=on in the URL, but the server does not enforce them: "+res.Evidence+wrote,
			"remove conditional=on (conditional=auto probes and chooses the claims lock): with it the compare-and-swap lock cannot keep a second instance out", fe)
	case mode == s3.ConditionalOff && res.Supported:
		d.add(checkConditional, statusOK, "enforced: "+res.Evidence+wrote+"; conditional=off in the URL makes the lock use claims anyway",
			"conditional=auto would use compare-and-swap", fe)
	case res.Supported:
		d.add(checkConditional, statusOK, "enforced: "+res.Evidence+wrote, "", fe)
	default:
		d.add(checkConditional, statusOK, "not enforced: "+res.Evidence+wrote, "", fe)
	}
	d.add(checkLockMode, statusOK, lockModeText(d.lockMode, p.LockModeWhy), "", &lockModeFacts{LockMode: p.LockMode, Evidence: res.Evidence})
	if !res.Supported {
		d.add(checkListConsistency, statusWarn, "the claims lock assumes that a listing shows every write that completed before it (AWS S3, MinIO and versitygw do; Garage does in its default consistency_mode = \"consistent\"); doctor cannot read the server's configuration",
			"on Garage, keep consistency_mode = \"consistent\" (or leave it unset) in garage.toml: under \"degraded\" or \"dangerous\" two instances can both hold the lock", nil)
	}
}

// lockModeText describes a lock mode and why this configuration uses it.
func lockModeText(m lock.Mode, why string) string {
	if m == lock.ModeCAS {
		return "compare-and-swap: the lock is one object written with conditions (" + why + ")"
	}
	return "claims: each acquisition writes a claim and lists everybody's, no compare-and-swap needed (" + why + ")"
}
