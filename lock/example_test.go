package lock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"filippo.io/age"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/envelope"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// Boot takes the lock before touching state, writes through a store fenced
// by it, and releases it on shutdown. A second instance is refused with an
// error naming the holder.
func ExampleAcquire() {
	ctx := context.Background()
	id, _ := age.GenerateX25519Identity()
	env, _ := envelope.New([]age.Identity{id}, nil, nil)
	st, _ := store.Open(mem.New(mem.Options{}), env, store.Options{})
	quiet := slog.New(slog.DiscardHandler)

	l, err := lock.Acquire(ctx, st, lock.Options{InstanceID: "pod-a", Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	app := st.WithFence(l) // refuses writes once the lock is lost or released
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

// Inspect shows an operator who holds the lock, without changing it.
func ExampleInspect() {
	ctx := context.Background()
	id, _ := age.GenerateX25519Identity()
	env, _ := envelope.New([]age.Identity{id}, nil, nil)
	st, _ := store.Open(mem.New(mem.Options{NoConditionalWrites: true}), env, store.Options{})

	l, err := lock.Acquire(ctx, st, lock.Options{InstanceID: "pod-a", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Release(ctx)
	s, err := lock.Inspect(ctx, st, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("holder=%s %s, mode %s, epoch %d\n", s.Record.InstanceID, s.Liveness, s.Mode, s.Record.Epoch)
	fmt.Println("a boot with another id would:", s.NextBoot[:len("refuse to start")])
	// Output:
	// holder=pod-a live, mode claims, epoch 1
	// a boot with another id would: refuse to start
}
