package lock

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/backend/s3"
	"github.com/cairnhq/state/internal/driver"
	"github.com/cairnhq/state/internal/garageserver"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/store"
	"github.com/cairnhq/state/testutil"
	"github.com/cairnhq/state/testutil/garage"
	"github.com/cairnhq/state/testutil/versitygw"
)

// BenchmarkSteps times each step of the lock's life on its own, per mode
// and server: acquiring a free lock, one heartbeat, releasing. On Garage
// with one node and with three (the cluster's multi-endpoint URL):
//
//	go test -run '^$' -bench 'BenchmarkSteps' -benchtime 20x -count 5 ./lock > steps.txt; benchstat -col /server steps.txt
func BenchmarkSteps(b *testing.B) {
	s3b := func(b *testing.B, srv *testutil.S3Server, bucket string) backend.Backend {
		opts := srv.Options(bucket)
		opts.Credentials = credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, "")
		opts.Logger = slog.New(slog.DiscardHandler)
		opts.HTTPClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		be, err := s3.New(context.Background(), opts)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = be.(io.Closer).Close() })
		return be
	}
	for _, s := range []struct {
		name string
		new  func(b *testing.B) backend.Backend
	}{
		{"mem", func(*testing.B) backend.Backend { return mem.New(mem.Options{}) }},
		{"mem-claims", func(*testing.B) backend.Backend { return mem.New(mem.Options{NoConditionalWrites: true}) }},
		{"versitygw", func(b *testing.B) backend.Backend {
			srv := versitygw.Start(b)
			return s3b(b, &srv.S3Server, srv.NewBucket(b))
		}},
		{"garage-1", func(b *testing.B) backend.Backend {
			srv := garage.Start(b)
			return s3b(b, &srv.S3Server, srv.NewBucket(b))
		}},
		{"garage-3", func(b *testing.B) backend.Backend {
			c := garageserver.StartCluster(b, 3)
			return s3b(b, &c.S3Server, c.NewBucket(b))
		}},
	} {
		b.Run("server="+s.name, func(b *testing.B) { benchSteps(b, s.new(b)) })
	}
}

func benchSteps(b *testing.B, be backend.Backend) {
	env := testkit.Envelope(b)
	st, err := storeadmin.Open(be, env, store.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	opts := Options{InstanceID: "bench", Logger: slog.New(slog.DiscardHandler)}
	if _, err := driver.ResolveCapabilities(ctx, be); err != nil { // the probe, once
		b.Fatal(err)
	}
	b.Run("step=acquire", func(b *testing.B) {
		for b.Loop() {
			l, err := Acquire(ctx, st, opts)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			<-l.cleanedUp()
			if err := l.Release(ctx); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	b.Run("step=heartbeat", func(b *testing.B) {
		l, err := Acquire(ctx, st, opts) // a heartbeat every minute: none of its own during the loop
		if err != nil {
			b.Fatal(err)
		}
		defer l.Release(ctx)
		<-l.cleanedUp()
		for b.Loop() {
			if err := l.beat(); err != nil {
				b.Fatal(err)
			}
		}
		if err := l.Err(); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("step=release", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			l, err := Acquire(ctx, st, opts)
			if err != nil {
				b.Fatal(err)
			}
			<-l.cleanedUp()
			b.StartTimer()
			if err := l.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
