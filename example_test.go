package state_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"filippo.io/age"

	state "github.com/cairnhq/state"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/migrate"
	"github.com/cairnhq/state/store"
)

// The boot sequence of an application: open, serve until SIGTERM or
// SIGINT (or until the lock is lost), close.
func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "cairn-example-")
	defer os.RemoveAll(dir)
	id, _ := age.GenerateX25519Identity() // in production: Config.IdentityFiles or CAIRN_STATE_IDENTITY

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	cfg := state.ConfigFromEnv()
	cfg.URL = "file://" + filepath.Join(dir, "state")
	cfg.Identities = []age.Identity{id}
	cfg.InstanceID = "pod-a"
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.Migrations = []migrate.Migration{{
		ID:          "0001-settings",
		Description: "default settings",
		Up: func(ctx context.Context, st *store.Store) error {
			_, err := st.Put(ctx, "settings/theme", []byte("dark"), store.PutOptions{})
			return err
		},
	}}

	inst, err := state.Open(ctx, cfg)
	if errors.Is(err, lock.ErrHeld) {
		fmt.Println("another instance is running:", err)
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	theme, _, _ := inst.Store().Get(ctx, "settings/theme")
	fmt.Printf("ready: instance=%s theme=%s migrations=%v\n", inst.Lock().Record().InstanceID, theme, inst.Migrations().Ran)

	// Serve here, until one of:
	//   <-ctx.Done()   SIGTERM or SIGINT: shut down gracefully
	//   <-inst.Lost()  another instance took over: stop writing, exit
	if err := inst.Close(context.WithoutCancel(ctx)); err != nil {
		fmt.Println(err)
	}
	fmt.Println("shutdown complete")
	// Output:
	// ready: instance=pod-a theme=dark migrations=[0001-settings]
	// shutdown complete
}
