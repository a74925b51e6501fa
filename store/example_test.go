package store_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strconv"
	"time"

	"filippo.io/age"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/envelope"
	"github.com/cairnhq/state/store"
)

// exampleEnvelope returns an envelope with a fresh identity; a real
// application loads its identity with envelope.LoadIdentityFile.
func exampleEnvelope() *envelope.Envelope {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		log.Fatal(err)
	}
	env, err := envelope.New([]age.Identity{id}, nil, nil)
	if err != nil {
		log.Fatal(err)
	}
	return env
}

func Example() {
	ctx := context.Background()
	b := mem.New(mem.Options{}) // or fs.New, s3.New
	st, err := store.Open(b, exampleEnvelope(), store.Options{Root: "apps/wiki"})
	if err != nil {
		log.Fatal(err)
	}
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
	// stored key: apps/wiki/.cairn-state/keys/session-secret
	// true
}

func ExampleStore_Update() {
	ctx := context.Background()
	st, err := store.Open(mem.New(mem.Options{}), exampleEnvelope(), store.Options{})
	if err != nil {
		log.Fatal(err)
	}
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
	fmt.Printf("boots=%s compare-and-swap=%v\n", boots, st.ConditionalWrites())
	// Output: boots=3 compare-and-swap=true
}

func ExampleGetJSON() {
	ctx := context.Background()
	st, err := store.Open(mem.New(mem.Options{}), exampleEnvelope(), store.Options{})
	if err != nil {
		log.Fatal(err)
	}
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
	st, _ := store.Open(b, exampleEnvelope(), store.Options{})
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

// lostLock stands in for a *lock.Lock whose heartbeat found another holder.
type lostLock struct{}

func (lostLock) Err() error { return errors.New(`state lock lost to "pod-b"`) }

func (lostLock) Deadline() (time.Time, bool) { return time.Time{}, false }

func ExampleStore_WithFence() {
	ctx := context.Background()
	base, _ := store.Open(mem.New(mem.Options{}), exampleEnvelope(), store.Options{})
	_, _ = base.Put(ctx, "token", []byte("v1"), store.PutOptions{})

	st := base.WithFence(lostLock{}) // in an application: base.WithFence(lock)
	_, err := st.Put(ctx, "token", []byte("v2"), store.PutOptions{})
	fmt.Println(errors.Is(err, store.ErrFenced))
	fmt.Println(err)
	v, _, _ := st.Get(ctx, "token") // reads still work
	fmt.Printf("%s\n", v)
	// Output:
	// true
	// store: put "token": write refused: this instance no longer holds the state lock: state lock lost to "pod-b"
	// v1
}

// Connect reads the store's manifest before anything else: the first
// write-capable connection creates it, and an identity the store is not
// sealed to is refused with ErrNotMember before it can read or write.
func ExampleConnect() {
	ctx := context.Background()
	b := mem.New(mem.Options{})
	owner, _ := age.GenerateX25519Identity()
	st, err := store.Connect(ctx, b, store.Keys{Identities: []age.Identity{owner}}, &store.ConnectOptions{Create: true})
	if err != nil {
		log.Fatal(err)
	}
	m, _ := st.Manifest()
	fmt.Println("format:", m.Format, "generation:", m.Generation, "recipients:", len(m.Recipients))

	stranger, _ := age.GenerateX25519Identity()
	_, err = store.Connect(ctx, b, store.Keys{Identities: []age.Identity{stranger}}, nil)
	var nm *store.NotMemberError
	fmt.Println(errors.Is(err, store.ErrNotMember), errors.As(err, &nm) && nm.StoreID == m.ID)
	// Output:
	// format: 2 generation: 1 recipients: 1
	// true true
}
