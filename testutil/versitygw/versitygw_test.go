package versitygw_test

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/testutil/versitygw"
)

func TestStart_ServesBucketsThroughBackendAndOracle(t *testing.T) {
	srv := versitygw.Start(t)
	bucket := srv.NewBucket(t)
	b := srv.Backend(t, bucket)
	ctx := context.Background()
	if !b.Capabilities().ConditionalWrites {
		t.Errorf("versitygw %s: probe found no conditional writes; it enforces them", versitygw.Version)
	}
	if _, err := b.Put(ctx, "a/b", []byte("hello"), backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	obj, err := srv.Minio(t).GetObject(ctx, bucket, "a/b", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	got, err := io.ReadAll(obj)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, []byte("hello")) {
		t.Errorf("oracle read %q, want %q", got, "hello")
	}
}
