package store_test

import (
	"context"
	"testing"

	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/store"
)

// settle waits until nothing a write through st's connection left behind
// it (the keeps, ADR 0065) is in flight. Its context is not the test's:
// settle also runs in cleanups, after the test's context is cancelled.
func settle(_ testing.TB, st *store.Store) { _ = storeadmin.WaitKeeps(context.Background(), st) }
