//go:build unix

package fs_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/fs"
)

func Example() {
	dir, err := os.MkdirTemp("", "cairn-fs-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	b, err := fs.New(dir, fs.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer b.(io.Closer).Close()
	ctx := context.Background()

	// Create once: a second if-absent put fails.
	obj, err := b.Put(ctx, "app/token", []byte("v1"), backend.PutOptions{IfAbsent: true})
	if err != nil {
		log.Fatal(err)
	}
	_, err = b.Put(ctx, "app/token", []byte("other"), backend.PutOptions{IfAbsent: true})
	fmt.Println("second create:", errors.Is(err, backend.ErrPreconditionFailed))

	// Compare-and-swap on the version read earlier.
	if _, err := b.Put(ctx, "app/token", []byte("v2"), backend.PutOptions{IfVersion: obj.Version}); err != nil {
		log.Fatal(err)
	}
	_, err = b.Put(ctx, "app/token", []byte("v3"), backend.PutOptions{IfVersion: obj.Version})
	fmt.Println("stale swap:", errors.Is(err, backend.ErrPreconditionFailed))

	rc, _, err := b.Get(ctx, "app/token")
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	data, _ := io.ReadAll(rc)
	fmt.Printf("app/token = %s\n", data)
	// Output:
	// second create: true
	// stale swap: true
	// app/token = v2
}
