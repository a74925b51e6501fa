//go:build cairntest

// This file is compiled only into the binary the tests build (go build
// -tags cairntest): the example as shipped has no test hooks.

package main

import "os"

// pauseEnv: with CAIRN_EXAMPLE_PAUSE_IN_MIGRATION=ID, migration ID stops
// half-way, prints "paused in migration ID" on stderr and waits, so that a
// test can kill the process in the middle of a step.
const pauseEnv = "CAIRN_EXAMPLE_PAUSE_IN_MIGRATION"

// testPauseInMigration reports whether migration id is to pause.
func testPauseInMigration(id string) bool { return os.Getenv(pauseEnv) == id }
