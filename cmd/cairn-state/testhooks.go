//go:build !cairntest

package main

// testRekeyPause is the test build's pause hook (testhooks_cairntest.go).
// The shipped binary has none, and reads no test variable.
func testRekeyPause(*app) (rekeyPause, error) { return nil, nil }
