//go:build !cairntest

package main

// testPauseInMigration is the test build's hook (testhooks_cairntest.go);
// the example as shipped never pauses and reads no test variable.
func testPauseInMigration(string) bool { return false }
