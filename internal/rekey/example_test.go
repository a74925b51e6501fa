package rekey_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"filippo.io/age"

	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/rekey"
	"github.com/cairnhq/state/store"
)

// A key rotation from Go: move the store to the new key, reading with the
// old one; afterwards the old key no longer belongs to the store.
func ExampleRun() {
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	b := mem.New(mem.Options{}) // in production: setup.OpenBackend(ctx, url, …)
	oldKey, _ := age.GenerateX25519Identity()
	newKey, _ := age.GenerateX25519Identity()

	st, err := store.Connect(ctx, b, store.Keys{Identities: []age.Identity{oldKey}}, store.ConnectOptions{Create: true, Options: store.Options{Logger: logger}})
	if err != nil {
		panic(err)
	}
	if _, err := st.Put(ctx, "tokens/github", []byte("t0k3n"), store.PutOptions{}); err != nil {
		panic(err)
	}

	res, err := rekey.Run(ctx, b, rekey.Options{
		Identities:    []age.Identity{newKey},
		OldIdentities: []age.Identity{oldKey},
		Progress:      func(p rekey.Progress) { fmt.Printf("%d/%d\n", p.Done, p.Total) },
		Logger:        logger,
	})

	if err != nil {
		panic(err)
	}
	fmt.Printf("re-sealed %d objects; key generation %d → %d\n", res.Resealed, res.PreviousGeneration, res.Manifest.Generation)

	_, err = store.Connect(ctx, b, store.Keys{Identities: []age.Identity{oldKey}}, store.ConnectOptions{})
	fmt.Println("old key:", errors.Is(err, store.ErrNotMember))
	// Output:
	// 0/1
	// 1/1
	// re-sealed 1 objects; key generation 1 → 2
	// old key: true
}
