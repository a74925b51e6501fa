package garage_test

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/testutil/garage"
)

func TestStart_ServesBucketsThroughBackendAndOracle(t *testing.T) {
	srv := garage.Start(t)
	bucket := srv.NewBucket(t)
	b := srv.Backend(t, bucket)
	ctx := context.Background()
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

func TestStart_EachServerIsIsolated(t *testing.T) {
	a, b := garage.Start(t), garage.Start(t)
	if a.Endpoint == b.Endpoint || a.AccessKey == b.AccessKey {
		t.Fatalf("two servers share an endpoint or key: %s %s", a.Endpoint, b.Endpoint)
	}
	bucket := a.NewBucket(t)
	ok, err := b.Minio(t).BucketExists(context.Background(), bucket)
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		t.Errorf("bucket %q of one server exists on the other", bucket)
	}
}
