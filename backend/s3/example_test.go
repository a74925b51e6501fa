package s3_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"

	"github.com/cairnhq/state/backend/s3"
)

// Opening a bucket from a backend URL, credentials from the standard AWS
// chain (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, profiles). The probe's
// finding decides whether the lock can use compare-and-swap.
func ExampleNew() {
	ctx := context.Background()
	opts, root, err := s3.ParseURL("s3://state/apps/wiki?endpoint=http://127.0.0.1:3900&region=garage")
	if err != nil {
		log.Fatal(err)
	}
	// Probe under the root's reserved prefix, so that credentials scoped
	// to the root suffice.
	opts.ProbePrefix = root + "/.cairn-state/"
	opts.Logger = slog.Default()
	b, err := s3.New(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	if b.Capabilities().ConditionalWrites {
		fmt.Println("compare-and-swap available")
	} else {
		fmt.Println("no conditional writes: the lock runs in advisory mode")
	}
}
