package s3_test

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/s3"
	"github.com/cairnhq/state/internal/garageserver"
	"github.com/cairnhq/state/testutil/garage"
	"github.com/cairnhq/state/testutil/versitygw"
)

// BenchmarkS3 measures Put and Get of 4 KiB and 1 MiB objects, a List of
// 100 keys and the conditional-write probe against each real server on
// loopback — versitygw, a single Garage node, and a three-node Garage
// cluster through its multi-endpoint URL — so that benchstat can put the
// servers side by side:
//
//	go test -run x -bench S3 -count 5 ./backend/s3 > s3.txt
//	benchstat -col /server s3.txt
func BenchmarkS3(b *testing.B) {
	for _, s := range benchServers {
		b.Run("server="+s.name, func(b *testing.B) {
			srv := s.start(b)
			bucket := srv.NewBucket(b)
			be := newBackend(b, srv, bucket, s3.ConditionalAuto)
			b.Run("List/100", func(b *testing.B) {
				for i := range 100 {
					if _, err := be.Put(b.Context(), fmt.Sprintf("list/%03d", i), []byte("x"), backend.PutOptions{}); err != nil {
						b.Fatal(err)
					}
				}
				for b.Loop() {
					n := 0
					if err := be.List(b.Context(), "list/", func(backend.Object) error { n++; return nil }); err != nil || n != 100 {
						b.Fatalf("listed %d, %v", n, err)
					}
				}
			})
			b.Run("NewWithProbe", func(b *testing.B) {
				opts := srv.Options(bucket)
				opts.HTTPClient = httpClient(b)
				opts.Logger = slog.New(slog.DiscardHandler)
				for b.Loop() {
					nb, err := s3.NewBackend(b.Context(), opts)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := nb.ResolveCapabilities(b.Context()); err != nil {
						b.Fatal(err)
					}
					nb.Close()
				}
			})
			for _, size := range []int{4 << 10, 1 << 20} {
				data := make([]byte, size)
				for i := range data {
					data[i] = byte(i * 7)
				}
				key := fmt.Sprintf("bench/%d", size)
				b.Run(fmt.Sprintf("Put/%s", sizeName(size)), func(b *testing.B) {
					b.SetBytes(int64(size))
					b.ReportAllocs()
					for b.Loop() {
						if _, err := be.Put(b.Context(), key, data, backend.PutOptions{}); err != nil {
							b.Fatal(err)
						}
					}
				})
				b.Run(fmt.Sprintf("Get/%s", sizeName(size)), func(b *testing.B) {
					if _, err := be.Put(b.Context(), key, data, backend.PutOptions{}); err != nil {
						b.Fatal(err)
					}
					b.SetBytes(int64(size))
					b.ReportAllocs()
					for b.Loop() {
						rc, _, err := be.Get(b.Context(), key)
						if err != nil {
							b.Fatal(err)
						}
						n, err := io.Copy(io.Discard, rc)
						rc.Close()
						if err != nil || n != int64(size) {
							b.Fatalf("read %d bytes, %v", n, err)
						}
					}
				})
			}
		})
	}
}

// benchServers are the servers the benchmarks run on: versitygw, a single
// Garage node, and a three-node Garage cluster through its multi-endpoint
// URL.
var benchServers = []struct {
	name  string
	start func(testing.TB) server
}{
	{"versitygw", func(tb testing.TB) server { return versitygw.Start(tb) }},
	{"garage1", func(tb testing.TB) server { return garage.Start(tb) }},
	{"garage3", func(tb testing.TB) server { return garageserver.StartCluster(tb, 3) }},
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}
