package store_test

import (
	"context"
	"fmt"
	"log/slog"

	"filippo.io/age"

	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// A bad overwrite undone: the versions of a name, an old one read back
// and restored as a new version.
func ExampleStore_History() {
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	id, _ := age.GenerateX25519Identity()
	st, err := store.Connect(ctx, mem.New(mem.Options{}), store.Keys{Identities: []age.Identity{id}},
		store.ConnectOptions{Create: true, Options: store.Options{Logger: quiet}})

	if err != nil {
		panic(err)
	}
	l, err := lock.Acquire(ctx, st, lock.Options{InstanceID: "pod-a", Logger: quiet})
	if err != nil {
		panic(err)
	}
	defer l.Release(ctx)
	fenced := l.Fence(st) // history is kept by writes under the lock
	fenced.Put(ctx, "app/db-password", []byte("hunter2"), store.PutOptions{})
	fenced.Put(ctx, "app/db-password", nil, store.PutOptions{}) // the mistake

	vs, _ := st.History(ctx, "app/db-password")
	for _, v := range vs {
		fmt.Println(v.ID, v.Instance, v.Current)
	}
	old, _, _ := st.GetVersion(ctx, "app/db-password", vs[1].ID)
	fmt.Printf("version %s: %s\n", vs[1].ID, old)
	res, _ := fenced.Restore(ctx, "app/db-password", vs[1].ID)
	fmt.Printf("restored %s as %s, replacing %s\n", res.From, res.Written.ID, res.Replaced)
	// Output:
	// 1.2 pod-a true
	// 1.1 pod-a false
	// version 1.1: hunter2
	// restored 1.1 as 1.3, replacing 1.2
}
