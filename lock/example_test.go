package lock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"filippo.io/age"

	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// Boot takes the lock before touching state, writes through a store fenced
// by it, and releases it on shutdown. A second instance is refused with an
// error naming the holder.
func ExampleAcquire() {
	ctx := context.Background()
	id, _ := age.GenerateX25519Identity()
	st, _ := store.Connect(ctx, mem.New(mem.Options{}), store.Keys{Identities: []age.Identity{id}}, store.ConnectOptions{Create: true})
	quiet := slog.New(slog.DiscardHandler)

	l, err := lock.Acquire(ctx, st, lock.Options{InstanceID: "pod-a", Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	app := l.Fence(st) // refuses writes once the lock is lost or released
	if _, err := app.Put(ctx, "counter", []byte("1"), store.PutOptions{}); err != nil {
		fmt.Println(err)
	}
	fmt.Printf("held by %s, epoch %d, mode %s\n", l.Record().InstanceID, l.Record().Epoch, l.Mode())

	_, err = lock.Acquire(ctx, st, lock.Options{InstanceID: "pod-b", Logger: quiet})
	var held *lock.HeldError
	if errors.As(err, &held) {
		fmt.Printf("second instance refused: held by %q\n", held.Holder.InstanceID)
	}
	_, err = lock.Acquire(ctx, st, lock.Options{InstanceID: "pod-a", Logger: quiet})
	if errors.As(err, &held) && held.Duplicate {
		fmt.Println("same id again refused: a duplicate instance id")
	}

	if err := l.Release(ctx); err != nil {
		fmt.Println(err)
	}
	_, err = app.Put(ctx, "counter", []byte("2"), store.PutOptions{})
	fmt.Println("write after release refused:", errors.Is(err, lock.ErrReleased))
	// Output:
	// held by pod-a, epoch 1, mode compare-and-swap
	// second instance refused: held by "pod-a"
	// same id again refused: a duplicate instance id
	// write after release refused: true
}
