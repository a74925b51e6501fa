package garage_test

import (
	"context"
	"testing"

	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/testutil/garage"
)

func TestStart_ServesBucketsThroughBackendAndOracle(t *testing.T) {
	testkit.RoundTrip(t, &garage.Start(t).S3Server)
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
