package store_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strconv"
	"strings"

	"filippo.io/age"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/store"
)

// exampleStore connects to a new store on b with a fresh identity; a real
// application loads its identity from a file (age.ParseIdentities) and
// usually opens the store through state.Open.
func exampleStore(b backend.Backend, opts store.Options) *store.Store {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		log.Fatal(err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler) // no "created a new store" warning
	}
	st, err := store.Connect(context.Background(), b, store.Keys{Identities: []age.Identity{id}},
		store.ConnectOptions{Create: true, Options: opts})
	if err != nil {
		log.Fatal(err)
	}
	return st
}

func Example() {
	ctx := context.Background()
	b := mem.New(mem.Options{}) // or fs.New, s3.New
	st := exampleStore(b, store.Options{Root: "apps/wiki"})
	if _, err := st.Put(ctx, "keys/session-secret", []byte("s3cr3t"), store.PutOptions{}); err != nil {
		log.Fatal(err)
	}
	value, _, err := st.Get(ctx, "keys/session-secret")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("value: %s\n", value)

	// The backend holds only ciphertext, under the reserved prefix.
	_ = b.List(ctx, "", func(o backend.Object) error {
		fmt.Println("stored key:", o.Key)
		return nil
	})

	_, _, err = st.Get(ctx, "../../etc/passwd")
	fmt.Println(errors.Is(err, store.ErrInvalidName))
	// Output:
	// value: s3cr3t
	// stored key: apps/wiki/.cairn-state/.store
	// stored key: apps/wiki/.cairn-state/keys/session-secret
	// true
}

func ExampleStore_Update() {
	ctx := context.Background()
	st := exampleStore(mem.New(mem.Options{}), store.Options{})
	for range 3 {
		// Atomic on backends with conditional writes: fn is re-run when
		// another writer got in between.
		_, err := st.Update(ctx, "boots", func(old []byte, exists bool) ([]byte, error) {
			n := 0
			if exists {
				n, _ = strconv.Atoi(string(old))
			}
			return []byte(strconv.Itoa(n + 1)), nil
		})
		if err != nil {
			log.Fatal(err)
		}
	}
	boots, _, _ := st.Get(ctx, "boots")
	fmt.Printf("boots=%s\n", boots)
	// Output: boots=3
}

func ExampleGetJSON() {
	ctx := context.Background()
	st := exampleStore(mem.New(mem.Options{}), store.Options{})
	type Settings struct {
		Theme    string `json:"theme"`
		FontSize int    `json:"font_size"` // added in schema 2
	}
	// Written by version 1 of the application.
	if _, err := store.PutJSON(ctx, st, "settings", 1, map[string]string{"theme": "dark"}, store.PutOptions{}); err != nil {
		log.Fatal(err)
	}
	doc, err := store.GetJSON[Settings](ctx, st, "settings")
	if err != nil {
		log.Fatal(err)
	}
	if doc.Schema < 2 {
		doc.Value.FontSize = 14 // the default the new schema introduced
		if _, err := store.PutJSON(ctx, st, "settings", 2, doc.Value, store.PutOptions{IfVersion: doc.Info.Version}); err != nil {
			log.Fatal(err)
		}
	}
	doc, _ = store.GetJSON[Settings](ctx, st, "settings")
	fmt.Printf("schema %d: %+v\n", doc.Schema, doc.Value)
	// Output: schema 2: {Theme:dark FontSize:14}
}

func ExampleGuard() {
	ctx := context.Background()
	b := mem.New(mem.Options{})
	st := exampleStore(b, store.Options{})
	_, _ = st.Put(ctx, "token", []byte("state"), store.PutOptions{})

	// The application's own use of the same bucket goes through the guard.
	app := store.Guard(b, "")
	_, err := app.Put(ctx, ".cairn-state/token", []byte("oops"), backend.PutOptions{})
	fmt.Println(errors.Is(err, store.ErrReservedKey))
	_, err = app.Put(ctx, "uploads/avatar.png", []byte("png"), backend.PutOptions{})
	fmt.Println(err)
	_ = app.List(ctx, "", func(o backend.Object) error {
		fmt.Println("app sees:", o.Key)
		return nil
	})
	// Output:
	// true
	// <nil>
	// app sees: uploads/avatar.png
}

// Connect reads the store's manifest before anything else: a connection
// allowed to create a store makes one where there is none, and an
// identity the store is not sealed to is refused with ErrNotMember before
// it can read or write.
func ExampleConnect() {
	ctx := context.Background()
	b := mem.New(mem.Options{})
	owner, _ := age.GenerateX25519Identity()
	st, err := store.Connect(ctx, b, store.Keys{Identities: []age.Identity{owner}}, store.ConnectOptions{Create: true})
	if err != nil {
		log.Fatal(err)
	}
	id := st.StoreID() // every object is bound to it; ConnectOptions.StoreID pins it
	fmt.Println("store id:", len(id), "hexadecimal digits")

	stranger, _ := age.GenerateX25519Identity()
	_, err = store.Connect(ctx, b, store.Keys{Identities: []age.Identity{stranger}}, store.ConnectOptions{})
	fmt.Println(errors.Is(err, store.ErrNotMember), strings.Contains(err.Error(), id))
	// Output:
	// store id: 32 hexadecimal digits
	// true true
}

// A large value streams: sealed into a temporary file and sent from it,
// read into one and opened chunk by chunk, never held whole in memory.
func ExampleStore_PutReader() {
	ctx := context.Background()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		log.Fatal(err)
	}
	st, err := store.Connect(ctx, mem.New(mem.Options{}), store.Keys{Identities: []age.Identity{id}},
		store.ConnectOptions{Create: true, Options: store.Options{Logger: slog.New(slog.DiscardHandler)}})

	if err != nil {
		log.Fatal(err)
	}
	value := strings.Repeat("a large value ", 1<<18) // 3.5 MiB; a file, a pipe
	info, err := st.PutReader(ctx, "db/snapshot", strings.NewReader(value), store.PutOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("sealed bytes:", info.Size > int64(len(value)))
	r, _, err := st.GetReader(ctx, "db/snapshot")
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	n, err := io.Copy(io.Discard, r) // an error here: a chunk did not authenticate
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("read back:", n == int64(len(value)))
	// Output:
	// sealed bytes: true
	// read back: true
}
