package store_test

import (
	"testing"

	"github.com/cairnhq/state/store"
)

// settle waits until nothing a write through st's connection left behind
// it (the keeps, ADR 0065) is in flight.
func settle(_ testing.TB, st *store.Store) { store.Settle(st) }
