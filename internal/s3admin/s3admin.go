// Package s3admin runs the S3 backend's probes and diagnosis for
// cairn-state's own packages (`cairn-state doctor`, the tests): an
// application opens its store and never needs them (docs/adr/0048, 0052).
package s3admin

import (
	"context"

	"github.com/cairnhq/state/backend/s3"
	"github.com/cairnhq/state/internal/s3diag"
)

var ops = s3diag.Get[*s3.Backend]()

// Diagnose checks, for an operator's tool, each part of the way to the
// store and tells apart what is wrong: the credentials, each endpoint
// (connected to, then sent one signed listing), the refusal of the first
// that answered, the conditional-write probe, the storage's clocks. It
// reports every finding in the Diagnosis and fails with no error of its
// own (the diagnose function of package s3 documents each step).
func Diagnose(ctx context.Context, b *s3.Backend) s3diag.Diagnosis { return ops.Diagnose(b, ctx) }

// Probe checks, on a throwaway object, that the server enforces every
// condition the backend relies on, in both directions (PutObject's
// If-None-Match and If-Match, DeleteObject's If-Match), without changing
// the backend's capabilities. Transport, permission and bucket errors fail
// the probe.
func Probe(ctx context.Context, b *s3.Backend) (s3diag.ProbeResult, error) { return ops.Probe(b, ctx) }

// ProbeCopy checks, on throwaway objects below the probe prefix, which
// conditions of CopyObject the server enforces, each in both directions,
// without changing the backend's capabilities.
func ProbeCopy(ctx context.Context, b *s3.Backend) (s3diag.CopyProbeResult, error) {
	return ops.ProbeCopy(b, ctx)
}
