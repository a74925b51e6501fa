//go:build unix

package fs_test

import (
	"fmt"
	"io"
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/fs"
)

var benchSizes = []struct {
	name string
	size int
}{
	{"4KiB", 4 << 10},
	{"1MiB", 1 << 20},
}

// BenchmarkPut measures a durable unconditional write: temp file, two
// fsyncs (file and directory), rename, under the cross-process lock.
func BenchmarkPut(b *testing.B) {
	for _, s := range benchSizes {
		b.Run(s.name, func(b *testing.B) {
			be, _ := newBackend(b, fs.Options{})
			data := make([]byte, s.size)
			b.SetBytes(int64(s.size))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := be.Put(b.Context(), "bench/object", data, backend.PutOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPutIfVersion measures a compare-and-swap write, which also reads
// the current version under the lock.
func BenchmarkPutIfVersion(b *testing.B) {
	for _, s := range benchSizes {
		b.Run(s.name, func(b *testing.B) {
			be, _ := newBackend(b, fs.Options{})
			data := make([]byte, s.size)
			obj, err := be.Put(b.Context(), "bench/object", data, backend.PutOptions{})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(s.size))
			b.ReportAllocs()
			for b.Loop() {
				if obj, err = be.Put(b.Context(), "bench/object", data, backend.PutOptions{IfVersion: obj.Version}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGet measures opening an object and reading it whole.
func BenchmarkGet(b *testing.B) {
	for _, s := range benchSizes {
		b.Run(s.name, func(b *testing.B) {
			be, _ := newBackend(b, fs.Options{})
			if _, err := be.Put(b.Context(), "bench/object", make([]byte, s.size), backend.PutOptions{}); err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, s.size+1)
			b.SetBytes(int64(s.size))
			b.ReportAllocs()
			for b.Loop() {
				rc, _, err := be.Get(b.Context(), "bench/object")
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.ReadFull(rc, buf)
				rc.Close()
				if n != s.size || err != io.ErrUnexpectedEOF {
					b.Fatal(fmt.Errorf("read %d bytes (%v), want %d", n, err, s.size))
				}
			}
		})
	}
}
