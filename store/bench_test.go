package store_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/s3"
	"github.com/cairnhq/state/internal/driver"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/store"
	"github.com/cairnhq/state/testutil/versitygw"
)

// BenchmarkVersitygw measures the store against raw aws-sdk-go-v2 calls on
// the same versitygw, in the same run: */store is the store (seal or open
// included), */raw the bare SDK call on the same bytes. Both use the same
// HTTP transport settings and checksum policy, so the ratio is the store's
// own cost.
//
//	go test -run x -bench Versitygw -count 5 ./store
func BenchmarkVersitygw(b *testing.B) {
	be, raw, bucket, opts := benchVersitygw(b)
	// The store as applications get it: connected through its manifest,
	// every object bound to the store id and sealed to its recipient set.
	key := testkit.Identity(b)
	st, err := store.Connect(context.Background(), be, store.Keys{Identities: []age.Identity{key}},
		store.ConnectOptions{Create: true, Options: store.Options{Logger: opts.Logger}})

	if err != nil {
		b.Fatal(err)
	}
	if m, ok := storeadmin.Manifest(st); !ok || m.ID.IsZero() {
		b.Fatal("no manifest")
	}
	ctx := context.Background()
	value := make([]byte, 4<<10)
	rand.Read(value)

	rawPut := func(key string, data []byte) error {
		_, err := raw.PutObject(ctx, &awss3.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data)))})
		return err
	}
	rawGet := func(key string) ([]byte, error) {
		out, err := raw.GetObject(ctx, &awss3.GetObjectInput{Bucket: &bucket, Key: &key})
		if err != nil {
			return nil, err
		}
		defer out.Body.Close()
		return io.ReadAll(out.Body)
	}

	if _, err := st.Put(ctx, "one", value, store.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	if err := rawPut("raw/one", value); err != nil {
		b.Fatal(err)
	}
	rawGetOne := func() error { _, err := rawGet("raw/one"); return err }
	rawPutOne := func() error { return rawPut("raw/one", value) }
	b.Run("Get4KiB/store", func(b *testing.B) { loop(b, len(value), getOne(ctx, st)) })
	b.Run("Get4KiB/raw", func(b *testing.B) { loop(b, len(value), rawGetOne) })
	b.Run("Get4KiB/paired", func(b *testing.B) { paired(b, getOne(ctx, st), rawGetOne) })
	b.Run("Put4KiB/store", func(b *testing.B) { loop(b, len(value), putOne(ctx, st, value)) })
	b.Run("Put4KiB/raw", func(b *testing.B) { loop(b, len(value), rawPutOne) })
	b.Run("Put4KiB/paired", func(b *testing.B) { paired(b, putOne(ctx, st, value), rawPutOne) })

	// A fenced store (a holder's, docs/adr/0026): every write conditional
	// on the version it knows, here the one it wrote last.
	fenced := storeadmin.WithFence(st, &switchFence{})
	if _, err := fenced.Put(ctx, "fenced", value, store.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	b.Run("Put4KiB/fenced-paired", func(b *testing.B) {
		paired(b, func() error { _, err := fenced.Put(ctx, "fenced", value, store.PutOptions{}); return err }, rawPutOne)
	})

	// The S3 backend alone against the raw SDK, to tell the backend's
	// cost from the sealing's.
	b.Run("Put4KiB/backend-paired", func(b *testing.B) {
		paired(b, func() error { _, err := be.Put(ctx, "backend/one", value, backend.PutOptions{}); return err }, rawPutOne)
	})

	const objects, concurrency = 1000, store.DefaultConcurrency
	names := make([]string, objects)
	rawKeys := make([]string, objects)
	if err := parallel(objects, concurrency, func(i int) error {
		names[i] = fmt.Sprintf("many/%04d", i)
		rawKeys[i] = "raw/many/" + names[i]
		if _, err := st.Put(ctx, names[i], value, store.PutOptions{}); err != nil {
			return err
		}
		return rawPut(rawKeys[i], value)
	}); err != nil {
		b.Fatal(err)
	}
	storeLoad := func() error {
		_, err := st.GetMany(ctx, names, store.ManyOptions{Concurrency: concurrency})
		return err
	}
	b.Run("Load1000x4KiB/store-GetMany", func(b *testing.B) { loop(b, objects*len(value), storeLoad) })
	rawLoad := func() error {
		return parallel(objects, concurrency, func(i int) error {
			_, err := rawGet(rawKeys[i])
			return err
		})
	}
	b.Run("Load1000x4KiB/raw", func(b *testing.B) { loop(b, objects*len(value), rawLoad) })
	b.Run("Load1000x4KiB/paired", func(b *testing.B) { paired(b, storeLoad, rawLoad) })
}

// parallel calls fn for 0 … n-1 on concurrency goroutines and returns an
// error one of the calls returned, if any did.
func parallel(n, concurrency int, fn func(i int) error) error {
	var wg sync.WaitGroup
	var next atomic.Int64
	var failed atomic.Pointer[error]
	for range concurrency {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := fn(i); err != nil {
					failed.Store(&err)
				}
			}
		})
	}
	wg.Wait()
	if p := failed.Load(); p != nil {
		return *p
	}
	return nil
}

// paired runs the store operation and the raw one alternately in each
// iteration (swapping which goes first) and reports both mean times and
// their ratio. On a shared, busy machine this is fairer than comparing two
// benchmarks run a few seconds apart: both sides see the same load.
func paired(b *testing.B, storeOp, rawOp func() error) {
	var tStore, tRaw time.Duration
	timed := func(op func() error, total *time.Duration) {
		start := time.Now()
		if err := op(); err != nil {
			b.Fatal(err)
		}
		*total += time.Since(start)
	}
	n := 0
	for b.Loop() {
		if n%2 == 0 {
			timed(storeOp, &tStore)
			timed(rawOp, &tRaw)
		} else {
			timed(rawOp, &tRaw)
			timed(storeOp, &tStore)
		}
		n++
	}
	b.ReportMetric(float64(tStore.Nanoseconds())/float64(n), "store-ns/op")
	b.ReportMetric(float64(tRaw.Nanoseconds())/float64(n), "raw-ns/op")
	b.ReportMetric(float64(tStore)/float64(tRaw), "store/raw")
}

// benchHTTPClient keeps enough idle connections for the benchmark's
// concurrency, for the store and the raw client alike, and closes them at
// the end.
func benchHTTPClient(b *testing.B) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 2 * store.DefaultConcurrency
	b.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// benchVersitygw starts a versitygw with a bucket and returns the store's
// backend on it and a raw aws-sdk-go-v2 client on the same bucket, both
// with the same HTTP transport settings and checksum policy, so that a
// ratio of the two is the store's own cost.
func benchVersitygw(b *testing.B) (backend.Backend, *awss3.Client, string, s3.Options) {
	srv := versitygw.Start(b)
	bucket := srv.NewBucket(b)
	httpClient := benchHTTPClient(b)
	opts := srv.Options(bucket)
	opts.HTTPClient = httpClient
	opts.Logger = slog.New(slog.DiscardHandler)
	be, err := s3.New(context.Background(), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { be.(io.Closer).Close() })
	if _, err := driver.ResolveCapabilities(context.Background(), be); err != nil {
		b.Fatal(err)
	}
	raw := awss3.New(awss3.Options{
		Region:                     srv.Region,
		Credentials:                credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, ""),
		BaseEndpoint:               aws.String(srv.Endpoint),
		UsePathStyle:               true,
		HTTPClient:                 httpClient,
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
	return be, raw, bucket, opts
}
