package store

// DefaultConcurrency is the default ManyOptions.Concurrency, for the tests.
const DefaultConcurrency = defaultConcurrency

// MaxRootLen is the longest root prefix, for the tests.
const MaxRootLen = maxRootLen

// PutBackError and ManyError are the errors of a put-back object and of
// GetMany, for the tests.
type (
	PutBackError = putBackError
	ManyError    = manyError
)
