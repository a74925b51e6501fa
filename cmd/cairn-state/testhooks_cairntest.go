//go:build cairntest

// This file is compiled only into the binary the tests build (go build
// -tags cairntest): the shipped cairn-state has no test hooks.

package main

import (
	"context"
	"fmt"
	"strconv"
)

// rekeyPauseEnv: with CAIRN_STATE_TEST_REKEY_PAUSE_AFTER=N, rekey saves its
// progress after every object, and once it has re-sealed N objects says so
// on stderr and waits for a signal, so that tests can interrupt or kill it
// at a known point.
const rekeyPauseEnv = "CAIRN_STATE_TEST_REKEY_PAUSE_AFTER"

func testRekeyPause(a *app) (func(ctx context.Context, resealed int), int, error) {
	v := a.getenv(rekeyPauseEnv)
	if v == "" {
		return nil, 0, nil
	}
	after, err := strconv.Atoi(v)
	if err != nil {
		return nil, 0, usagef("%s=%q: not a number", rekeyPauseEnv, v)
	}
	paused := false
	return func(ctx context.Context, resealed int) {
		if resealed != after || paused {
			return
		}
		paused = true
		a.say("note", fmt.Sprintf("rekey: paused after %d objects (%s)", after, rekeyPauseEnv))
		<-ctx.Done()
	}, 1, nil
}
