package s3_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/cairnhq/state/backend/s3"
)

// Opening a bucket from a backend URL, credentials from the standard AWS
// chain (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, profiles). New sends no
// request; the lock's first acquisition runs the conditional-write probe,
// whose finding decides whether the lock can use compare-and-swap.
// Reading needs neither.
func ExampleNew() {
	ctx := context.Background()
	opts, root, err := s3.ParseURL("s3://state/apps/wiki?endpoint=http://10.0.0.1:3900,http://10.0.0.2:3900,http://10.0.0.3:3900&region=garage")
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
	defer b.(io.Closer).Close() // the backend's idle connections
	now, err := b.Now(ctx)      // the storage's clock, from one HeadBucket
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("the storage's clock:", now)
}
