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
// progress after re-sealing N objects, says so on stderr and waits for a
// signal, so that tests can interrupt or kill it at a known point.
const rekeyPauseEnv = "CAIRN_STATE_TEST_REKEY_PAUSE_AFTER"

func testRekeyPause(a *app) (rekeyPause, error) {
	v := a.getenv(rekeyPauseEnv)
	if v == "" {
		return nil, nil
	}
	after, err := strconv.Atoi(v)
	if err != nil {
		return nil, usagef("%s=%q: not a number", rekeyPauseEnv, v)
	}
	return func(ctx context.Context, resealed int, save func(context.Context) error) error {
		if resealed != after {
			return nil
		}
		if err := save(ctx); err != nil {
			return err
		}
		fmt.Fprintf(a.err, "rekey: paused after %d objects (%s)\n", after, rekeyPauseEnv)
		<-ctx.Done()
		return fmt.Errorf("rekey: paused: %w", ctx.Err())
	}, nil
}
