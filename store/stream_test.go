package store_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"runtime"
	"testing"
	"testing/iotest"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/driver"
	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/store"
)

func randomValue(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed)})
	r.Read(b)
	return b
}

// PutReader writes what Get reads, Put writes what GetReader reads, with
// the same Info and stamp; a recovery recipient (content-bound objects)
// changes nothing.
func TestPutReaderGetReader_InteroperateWithPutAndGet(t *testing.T) {
	testkit.Local(t, func(t *testing.T, b backend.Backend) {
		ctx := t.Context()
		keys := keysOf(testkit.Identity(t))
		keys.Recipients = append(keys.Recipients, testkit.Identity(t).Recipient())
		st := mustConnect(t, b, keys, true)
		fenced := storeadmin.WithFence(st, &switchFence{epoch: 4})
		for i, size := range []int{0, 1000, 3<<20 + 7} {
			val := randomValue(uint64(i), size)
			info, err := fenced.PutReader(ctx, "big", bytes.NewReader(val), store.PutOptions{})
			if err != nil {
				t.Fatalf("PutReader(%d bytes): %v", size, err)
			}
			if info.ID.Epoch != 4 || info.ID.Sequence == 0 {
				t.Errorf("PutReader made version %s", info.ID)
			}
			if hdr, err := envelope.PeekHeader("big", rawGet(t, b, store.Prefix+"big")); err != nil || hdr.Stamp != (envelope.Stamp{Generation: 1, Epoch: 4, Sequence: info.ID.Sequence}) {
				t.Errorf("PutReader stamped %+v, %v", hdr.Stamp, err)
			}
			got, gotInfo, err := st.Get(ctx, "big")
			if err != nil || !bytes.Equal(got, val) || !sameObject(gotInfo, info) {
				t.Fatalf("Get after PutReader: %d bytes, %+v, %v; PutReader said %+v", len(got), gotInfo, err, info)
			}
			if _, err := st.Put(ctx, "small", val, store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			r, rInfo, err := st.GetReader(ctx, "small")
			if err != nil {
				t.Fatalf("GetReader: %v", err)
			}
			if err := iotest.TestReader(r, val); err != nil {
				t.Errorf("GetReader of %d bytes: %v", size, err)
			}
			if err := r.Close(); err != nil {
				t.Error(err)
			}
			if _, want, _ := st.Get(ctx, "small"); !sameObject(rInfo, want) {
				t.Errorf("GetReader's Info %+v, Get's %+v", rInfo, want)
			}
		}
		if _, _, err := st.GetReader(ctx, "absent"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetReader of an absent object = %v, want ErrNotFound", err)
		}
	})
}

// A payload chunk altered in storage: Read fails with ErrUnreadable and
// envelope.ErrTampered after the chunks before it; a cut object fails
// GetReader itself. A content-bound object fails GetReader for either.
func TestGetReader_TamperedOrCut_AnErrorNeverShortData(t *testing.T) {
	testkit.Local(t, func(t *testing.T, b backend.Backend) {
		ctx := t.Context()
		for _, bound := range []bool{false, true} {
			keys := keysOf(testkit.Identity(t))
			if bound {
				keys.Recipients = append(keys.Recipients, testkit.Identity(t).Recipient())
			}
			st := connectAt(t, b, keys, map[bool]string{false: "plain", true: "bound"}[bound], 0)
			val := randomValue(3, 1<<20)
			if _, err := st.PutReader(ctx, "v", bytes.NewReader(val), store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			key, _ := storeadmin.Key(st, "v")
			sealed := rawGet(t, storeadmin.Backend(st), key)
			bad := bytes.Clone(sealed)
			bad[len(bad)-200<<10] ^= 1
			if _, err := storeadmin.Backend(st).Put(ctx, key, bad, backend.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			r, _, err := st.GetReader(ctx, "v")
			var got []byte
			if err == nil {
				got, err = io.ReadAll(r)
				r.Close()
			}
			if !errors.Is(err, store.ErrUnreadable) || !errors.Is(err, envelope.ErrTampered) {
				t.Errorf("bound=%v: reading a tampered object = %v, want ErrUnreadable and ErrTampered", bound, err)
			}
			if bound && len(got) > 0 || !bytes.Equal(got, val[:len(got)]) || len(got) >= len(val)-100<<10 {
				t.Errorf("bound=%v: before the error %d bytes came out", bound, len(got))
			}
			if _, err := storeadmin.Backend(st).Put(ctx, key, sealed[:len(sealed)-1000], backend.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, _, err := st.GetReader(ctx, "v"); !errors.Is(err, store.ErrUnreadable) || !errors.Is(err, envelope.ErrTruncated) {
				t.Errorf("bound=%v: GetReader of a cut object = %v, want ErrUnreadable and ErrTruncated", bound, err)
			}
		}
	})
}

// Over the maximum object size: refused while reading, nothing written.
// Conditions hold as for Put; an Upload is written once, by its own store.
func TestPutReader_LimitConditionsAndUploads(t *testing.T) {
	testkit.Local(t, func(t *testing.T, b backend.Backend) {
		ctx := t.Context()
		st := connectAt(t, b, keysOf(testkit.Identity(t)), "", 1<<20)
		if _, err := st.PutReader(ctx, "big", bytes.NewReader(make([]byte, 2<<20)), store.PutOptions{}); !errors.Is(err, store.ErrTooLarge) {
			t.Errorf("PutReader over the limit = %v, want ErrTooLarge", err)
		}
		if _, err := st.Stat(ctx, "big"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("after a refused PutReader, Stat = %v, want ErrNotFound", err)
		}
		info, err := st.PutReader(ctx, "v", bytes.NewReader([]byte("one")), store.PutOptions{IfAbsent: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.PutReader(ctx, "v", bytes.NewReader([]byte("two")), store.PutOptions{IfAbsent: true}); !errors.Is(err, store.ErrPreconditionFailed) {
			t.Errorf("PutReader IfAbsent over an object = %v, want ErrPreconditionFailed", err)
		}
		if _, err := st.PutReader(ctx, "v", bytes.NewReader([]byte("two")), store.PutOptions{IfVersion: info.Version}); err != nil {
			t.Errorf("PutReader IfVersion: %v", err)
		}
		u, err := storeadmin.Prepare(ctx, st, "u", bytes.NewReader([]byte("once")))
		if err != nil {
			t.Fatal(err)
		}
		defer u.Close()
		other := connectAt(t, b, keysOf(testkit.Identity(t)), "other", 0)
		if _, err := storeadmin.PutUpload(ctx, other, u, store.PutOptions{}); err == nil {
			t.Error("an Upload was written by another store")
		}
		if _, err := storeadmin.PutUpload(ctx, st, u, store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := storeadmin.PutUpload(ctx, st, u, store.PutOptions{}); err == nil {
			t.Error("an Upload was written twice")
		}
		fenced := storeadmin.WithFence(st, &switchFence{err: errors.New("lease lost")})
		u2, err := storeadmin.Prepare(ctx, st, "u", bytes.NewReader([]byte("fenced")))
		if err != nil {
			t.Fatal(err)
		}
		defer u2.Close()
		if _, err := storeadmin.PutUpload(ctx, fenced, u2, store.PutOptions{}); !errors.Is(err, store.ErrFenced) {
			t.Errorf("PutUpload through a tripped fence = %v, want ErrFenced", err)
		}
		if got, _, err := st.Get(ctx, "u"); err != nil || string(got) != "once" {
			t.Errorf("u = %q, %v; want the first upload", got, err)
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := storeadmin.Prepare(cctx, st, "c", bytes.NewReader([]byte("x"))); !errors.Is(err, context.Canceled) {
			t.Errorf("Prepare with a cancelled context = %v", err)
		}
	})
}

// The value is never held whole: a 24 MiB PutReader and GetReader each
// allocate a small fraction of it (counted in bytes allocated, not time).
func TestPutReaderGetReader_AllocateAFractionOfTheValue(t *testing.T) {
	testkit.Local(t, func(t *testing.T, b backend.Backend) {
		if _, ok := b.(driver.Directory); !ok {
			t.Skip("the mem backend holds values in memory")
		}
		ctx := t.Context()
		st := mustConnect(t, b, keysOf(testkit.Identity(t)), true)
		const size = 24 << 20
		src := io.LimitReader(zeroReader{}, size)
		allocated := func(f func()) uint64 {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			f()
			runtime.ReadMemStats(&after)
			return after.TotalAlloc - before.TotalAlloc
		}
		var err error
		put := allocated(func() { _, err = st.PutReader(ctx, "big", src, store.PutOptions{}) })
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		get := allocated(func() {
			var r io.ReadCloser
			if r, _, err = st.GetReader(ctx, "big"); err == nil {
				n, err = io.Copy(io.Discard, r)
				r.Close()
			}
		})
		if err != nil || n != size {
			t.Fatalf("GetReader: %d bytes, %v", n, err)
		}
		t.Logf("allocated: put %d KiB, get %d KiB of a %d MiB value", put>>10, get>>10, size>>20)
		if put > size/8 || get > size/8 {
			t.Errorf("allocated %d bytes to put and %d to get a %d-byte value, want under 1/8 of it", put, get, size)
		}
	})
}

// connectAt creates a store at root on b, with maxSize (0: the default).
func connectAt(t *testing.T, b backend.Backend, k store.Keys, root string, maxSize int64) *store.Store {
	t.Helper()
	st, err := store.Connect(t.Context(), b, k, store.ConnectOptions{Create: true, Options: store.Options{Logger: quiet(), Root: root, MaxObjectSize: maxSize}})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// Through a store opened with another Sealer, PutReader and GetReader
// hold the value in memory but behave the same.
func TestPutReaderGetReader_OtherSealer(t *testing.T) {
	ctx := t.Context()
	st, _ := newStore(t, store.Options{MaxObjectSize: 1 << 20})
	val := randomValue(5, 100_000)
	if _, err := st.PutReader(ctx, "v", bytes.NewReader(val), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	r, _, err := st.GetReader(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := iotest.TestReader(r, val); err != nil {
		t.Error(err)
	}
	if _, err := st.PutReader(ctx, "big", bytes.NewReader(make([]byte, 2<<20)), store.PutOptions{}); !errors.Is(err, store.ErrTooLarge) {
		t.Errorf("PutReader over the limit = %v, want ErrTooLarge", err)
	}
}
