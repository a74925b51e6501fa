package lockadmin_test

import (
	"context"
	"fmt"
	"log/slog"

	"filippo.io/age"

	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/lockadmin"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// Inspect shows an operator who holds the lock, without changing it.
func ExampleInspect() {
	ctx := context.Background()
	id, _ := age.GenerateX25519Identity()
	st, _ := store.Connect(ctx, mem.New(mem.Options{NoConditionalWrites: true}), store.Keys{Identities: []age.Identity{id}}, store.ConnectOptions{Create: true})

	l, err := lock.Acquire(ctx, st, lock.Options{InstanceID: "pod-a", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Release(ctx)
	s, err := lockadmin.Inspect(ctx, st, lockadmin.InspectOptions{})
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
