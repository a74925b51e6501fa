package store_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/store"
	"github.com/cairnhq/state/testutil"
	"github.com/cairnhq/state/testutil/garage"
	"github.com/cairnhq/state/testutil/versitygw"
)

// s3Under is a fresh bucket on a real S3 server, the backend on it, and the
// minio-go oracle's view of the server.
type s3Under struct {
	srv    *testutil.S3Server
	bucket string
	b      backend.Backend
}

// runRawBucketTests runs the raw-bucket tests on srv, each in a fresh
// bucket; cas is whether the server enforces conditional writes.
func runRawBucketTests(t *testing.T, srv *testutil.S3Server, cas bool) {
	fresh := func(t *testing.T) s3Under {
		bucket := srv.NewBucket(t)
		return s3Under{srv: srv, bucket: bucket, b: srv.Backend(t, bucket)}
	}
	t.Run("SecretNeverStored_KeysUnderReservedPrefix", func(t *testing.T) { testRawSecretNeverStored(t, fresh(t)) })
	t.Run("GuardedApplication_CannotTouchState", func(t *testing.T) { testRawGuard(t, fresh(t)) })
	t.Run("ConcurrentUpdates", func(t *testing.T) { testRawConcurrentUpdates(t, fresh(t), cas) })
	t.Run("SameValueTwice_NewVersion", func(t *testing.T) { testRawSameValueNewVersion(t, fresh(t), cas) })
}

// testRawSameValueNewVersion pins what compare-and-swap on S3 relies on:
// S3 versions (ETags) are the MD5 of the bytes, so only because sealing
// makes every write's bytes differ does writing the same value again give
// a new version, and a stale version cannot match by accident (ABA).
func testRawSameValueNewVersion(t *testing.T, u s3Under, cas bool) {
	ctx := t.Context()
	s := testkit.Store(t, u.b, store.Options{})
	first, err := s.Put(ctx, "same", []byte("identical value"), store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.Put(ctx, "same", []byte("identical value"), store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if first.Version == second.Version {
		t.Fatalf("two writes of the same value share version %s", first.Version)
	}
	if !cas {
		return
	}
	if _, err := s.Put(ctx, "same", []byte("identical value"), store.PutOptions{IfVersion: first.Version}); !errors.Is(err, store.ErrPreconditionFailed) {
		t.Errorf("Put with the first (stale) version = %v, want ErrPreconditionFailed", err)
	}
	if _, err := s.Put(ctx, "same", []byte("next"), store.PutOptions{IfVersion: second.Version}); err != nil {
		t.Errorf("Put with the current version: %v", err)
	}
}

func TestRawBucket_Versitygw(t *testing.T) {
	srv := versitygw.Start(t)
	runRawBucketTests(t, &srv.S3Server, true)
}

// oracleObjects reads every object in the bucket with minio-go, the
// independent client.
func oracleObjects(t *testing.T, u s3Under) map[string][]byte {
	t.Helper()
	ctx := t.Context()
	mc := u.srv.Minio(t)
	out := map[string][]byte{}
	for info := range mc.ListObjects(ctx, u.bucket, minio.ListObjectsOptions{Recursive: true}) {
		if info.Err != nil {
			t.Fatalf("oracle list: %v", info.Err)
		}
		obj, err := mc.GetObject(ctx, u.bucket, info.Key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatalf("oracle get %q: %v", info.Key, err)
		}
		data, err := io.ReadAll(obj)
		obj.Close()
		if err != nil {
			t.Fatalf("oracle read %q: %v", info.Key, err)
		}
		out[info.Key] = data
	}
	return out
}

func testRawSecretNeverStored(t *testing.T, u s3Under) {
	ctx := t.Context()
	const root = "apps/raw"
	s, secret, names := putSecret(t, u.b, root)
	if _, err := store.PutJSON(ctx, s, "json", 1, map[string]string{"k": string(secret)}, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	objects := oracleObjects(t, u)
	for key, data := range objects {
		if !strings.HasPrefix(key, root+"/.cairn-state/") {
			t.Errorf("stored key %q is outside %s/.cairn-state/", key, root)
		}
		if bytes.Contains(data, secret) || bytes.Contains(data, secret[:16]) {
			t.Errorf("stored object %q contains the secret", key)
		}
	}
	if len(objects) != len(names)+2 {
		t.Errorf("oracle saw %d objects, want %d", len(objects), len(names)+2)
	}
	for _, n := range names {
		got, _, err := s.Get(ctx, n)
		if err != nil || !bytes.Equal(got, secret) {
			t.Errorf("Get(%q) = %q, %v", n, got, err)
		}
	}
}

func testRawGuard(t *testing.T, u s3Under) {
	ctx := t.Context()
	s := testkit.Store(t, u.b, store.Options{Root: "guarded"})
	if _, err := s.Put(ctx, "token", []byte("state"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	g := store.Guard(u.b, "guarded")
	if _, err := g.Put(ctx, "guarded/.cairn-state/token", []byte("clobbered"), backend.PutOptions{}); err == nil {
		t.Fatal("guarded Put on a state key succeeded")
	}
	if _, err := g.Put(ctx, "guarded/app.txt", []byte("app"), backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	var listed []string
	if err := g.List(ctx, "guarded/", func(o backend.Object) error { listed = append(listed, o.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(listed, ",") != "guarded/app.txt" {
		t.Errorf("guarded List = %q, want only the application's key", listed)
	}
	if got, _, err := s.Get(ctx, "token"); err != nil || string(got) != "state" {
		t.Errorf("state after guarded writes = %q, %v", got, err)
	}
	if data := oracleObjects(t, u)["guarded/.cairn-state/token"]; bytes.Contains(data, []byte("clobbered")) || len(data) == 0 {
		t.Errorf("oracle: state object changed or missing (%d bytes)", len(data))
	}
}

func testRawConcurrentUpdates(t *testing.T, u s3Under, cas bool) {
	if u.b.Capabilities().ConditionalWrites != cas {
		t.Fatalf("backend conditional writes = %v, want %v", u.b.Capabilities().ConditionalWrites, cas)
	}
	s := testkit.Store(t, u.b, store.Options{Root: "updates", UpdateAttempts: 200})
	const writers, each = 4, 5
	got := incrementConcurrently(t, s, writers, each)
	if cas {
		if string(got) != fmt.Sprint(writers*each) {
			t.Errorf("counter = %s after %d concurrent compare-and-swap increments", got, writers*each)
		}
		return
	}
	// Without conditional writes Update is last-writer-wins, as documented:
	// concurrent increments may be lost, but none fails and the value is
	// always one that some writer wrote.
	n, err := strconv.Atoi(string(got))
	if err != nil || n < 1 || n > writers*each {
		t.Errorf("counter = %q after %d last-writer-wins increments, want 1..%d", got, writers*each, writers*each)
	}
	t.Logf("without conditional writes: %d of %d concurrent increments survived", n, writers*each)
}

func TestRawBucket_Garage(t *testing.T) {
	srv := garage.Start(t)
	// Garage 2.x ignores If-None-Match / If-Match; the probe must find that
	// and the store falls back to last-writer-wins.
	runRawBucketTests(t, &srv.S3Server, false)
}
