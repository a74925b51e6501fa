package s3_test

import (
	"fmt"
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/s3"
)

// BenchmarkCopy pairs a server-side copy of an object (conditional on the
// source's version, as history keeps a version) with a PUT of the same
// bytes to the same key, on each real server: what history's keep costs
// next to the write it follows (ADR 0041's appendix, ADR 0040):
//
//	go test -run x -bench Copy -count 10 ./backend/s3 > copy.txt
//	benchstat -col /op copy.txt
func BenchmarkCopy(b *testing.B) {
	for _, s := range benchServers {
		b.Run("server="+s.name, func(b *testing.B) {
			srv := s.start(b)
			be := newBackend(b, srv, srv.NewBucket(b), s3.ConditionalAuto)
			for _, size := range []int{4 << 10, 64 << 10, 1 << 20} {
				data := make([]byte, size)
				for i := range data {
					data[i] = byte(i * 13)
				}
				src := fmt.Sprintf("bench/src-%d", size)
				dst := fmt.Sprintf("bench/dst-%d", size)
				obj, err := be.Put(b.Context(), src, data, backend.PutOptions{})
				if err != nil {
					b.Fatal(err)
				}
				b.Run(fmt.Sprintf("size=%s/op=put", sizeName(size)), func(b *testing.B) {
					b.SetBytes(int64(size))
					for b.Loop() {
						if _, err := be.Put(b.Context(), dst, data, backend.PutOptions{}); err != nil {
							b.Fatal(err)
						}
					}
				})
				b.Run(fmt.Sprintf("size=%s/op=copy", sizeName(size)), func(b *testing.B) {
					b.SetBytes(int64(size))
					for b.Loop() {
						if _, err := be.Copy(b.Context(), src, dst, backend.CopyOptions{IfSourceVersion: obj.Version}); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}
