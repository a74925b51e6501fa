// Command embed is the README's embedding example, whole: an application
// that keeps its state with cairn-state, configured from the environment
// (CAIRN_STATE_URL, CAIRN_STATE_IDENTITY, CAIRN_STATE_RECIPIENTS).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	state "github.com/cairnhq/state"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/migrate"
	"github.com/cairnhq/state/store"
)

// settings is a JSON value kept in state.
type settings struct {
	Theme string `json:"theme"`
}

func main() {
	err := run()
	switch {
	case errors.Is(err, lock.ErrHeld):
		// state lock held by "pod-a" (pid 4242), last heartbeat 37s ago, stale after 5m0s (in 4m23s): …
		fmt.Fprintln(os.Stderr, "app:", err)
		os.Exit(3)
	case err != nil:
		fmt.Fprintln(os.Stderr, "app:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	cfg := state.ConfigFromEnv() // CAIRN_STATE_URL, CAIRN_STATE_IDENTITY, CAIRN_STATE_RECIPIENTS
	cfg.Migrations = []migrate.Migration{
		migrate.ImportDirIfPresent("/var/lib/app", "legacy/"), // the old on-disk state, if any, imported once
		{ID: "0002-settings", Description: "default settings", Up: seedSettings},
	}
	inst, err := state.Open(ctx, cfg) // backend → envelope → store → lock → migrations
	if err != nil {
		return err // names the stage that failed and why, e.g. "set CAIRN_STATE_URL"
	}

	// Get, Put, Delete, List, Update, GetMany are methods of the store;
	// the JSON helpers are functions: store.GetJSON(ctx, st, name).
	st := inst.Store()
	doc, err := store.GetJSON[settings](ctx, st, "settings")
	if err != nil {
		return errors.Join(err, inst.Close(context.WithoutCancel(ctx)))
	}
	fmt.Printf("ready: theme=%s epoch=%d\n", doc.Value.Theme, inst.Lock().Record().Epoch)

	select {
	case <-ctx.Done(): // SIGTERM or SIGINT: release the lock
	case <-inst.Lost(): // another instance took over: writes are already refused
	}
	return inst.Close(context.WithoutCancel(ctx))
}

// seedSettings writes the default settings on the first boot.
func seedSettings(ctx context.Context, st *store.Store) error {
	_, err := store.PutJSON(ctx, st, "settings", 1, settings{Theme: "dark"}, store.PutOptions{})
	return err
}
