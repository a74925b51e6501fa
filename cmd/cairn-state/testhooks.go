//go:build !cairntest

package main

import "context"

// testRekeyPause is the test build's pause hook (testhooks_cairntest.go).
// The shipped binary has none, reads no test variable, and saves rekey's
// progress at the library's default pace.
func testRekeyPause(*app) (func(ctx context.Context, resealed int), int, error) { return nil, 0, nil }
