package testkit

import (
	"bytes"
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/testutil"
	"github.com/cairnhq/state/testutil/garage"
	"github.com/cairnhq/state/testutil/versitygw"
	"github.com/minio/minio-go/v7"
)

// S3Server is a real S3 server a test or benchmark runs on: its name (a
// subtest's) and how to start a fresh one for tb.
type S3Server struct {
	Name  string
	Start func(tb testing.TB) *testutil.S3Server
}

// S3Servers are the real servers of the suites: versitygw, which enforces
// conditional writes, and a single Garage node, which does not.
var S3Servers = []S3Server{
	{"versitygw", func(tb testing.TB) *testutil.S3Server { return &versitygw.Start(tb).S3Server }},
	{"garage", func(tb testing.TB) *testutil.S3Server { return &garage.Start(tb).S3Server }},
}

// EachS3Server runs fn as a subtest on a fresh server of each of
// [S3Servers], named by the server.
func EachS3Server(t *testing.T, fn func(t *testing.T, srv *testutil.S3Server)) {
	for _, s := range S3Servers {
		t.Run(s.Name, func(t *testing.T) { fn(t, s.Start(t)) })
	}
}

// RoundTrip writes an object through a backend on a fresh bucket of srv,
// reads it back with the server's independent client (the oracle), and
// returns the backend: what a server helper must serve.
func RoundTrip(t *testing.T, srv *testutil.S3Server) backend.Backend {
	t.Helper()
	bucket := srv.NewBucket(t)
	b := srv.Backend(t, bucket)
	ctx := t.Context()
	if _, err := b.Put(ctx, "a/b", []byte("hello"), backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	obj, err := srv.Minio(t).GetObject(ctx, bucket, "a/b", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := readClose(t, obj); !bytes.Equal(got, []byte("hello")) {
		t.Errorf("oracle read %q, want %q", got, "hello")
	}
	return b
}
