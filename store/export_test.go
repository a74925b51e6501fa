package store

// DefaultConcurrency is the default ManyOptions.Concurrency, for the tests.
const DefaultConcurrency = defaultConcurrency

// MaxRootLen is the longest root prefix, for the tests.
const MaxRootLen = maxRootLen
