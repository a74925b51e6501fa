package s3

import "context"

// ParseConditionalMode is parseConditionalMode, for the tests.
var ParseConditionalMode = parseConditionalMode

// IsServerTempName is isServerTempName, for the tests.
var IsServerTempName = isServerTempName

// Backend is the backend New makes, for the tests, which use its side
// abilities (capabilities, probes, copies, Close) directly.
type Backend = s3Backend

// NewBackend is New, returning the backend's own type.
func NewBackend(ctx context.Context, opts Options) (*Backend, error) {
	b, err := New(ctx, opts)
	if err != nil {
		return nil, err
	}
	return b.(*s3Backend), nil
}
