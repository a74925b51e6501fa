package fault_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/driver"
	"github.com/cairnhq/state/internal/fault"
)

// recordingBody is a body that tells whether it was read through.
type recordingBody struct {
	*bytes.Reader
	reads int
}

func (r *recordingBody) ReadAt(p []byte, off int64) (int, error) {
	r.reads++
	return r.Reader.ReadAt(p, off)
}

// bodyCounter wraps mem (which has no PutBody of its own) and counts the
// PutBody calls reaching it.
type bodyCounter struct {
	backend.Backend
	bodies int
}

func (c *bodyCounter) PutBody(ctx context.Context, key string, body io.ReaderAt, size int64, opts backend.PutOptions) (backend.Object, error) {
	c.bodies++
	return driver.PutBody(ctx, c.Backend, key, body, size, opts)
}

func TestPutBody_ForwardedCountedAsPutAndSubjectToFaults(t *testing.T) {
	ctx := context.Background()
	inner := &bodyCounter{Backend: mem.New(mem.Options{})}
	f := fault.New(inner)
	body := &recordingBody{Reader: bytes.NewReader([]byte("streamed value"))}
	obj, err := driver.PutBody(ctx, f, "k", body, body.Size(), backend.PutOptions{IfAbsent: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := read(t, f, "k"); got != "streamed value" || obj.Size != body.Size() {
		t.Fatalf("read %q (size %d), want the body", got, obj.Size)
	}
	if inner.bodies != 1 || body.reads == 0 {
		t.Errorf("the wrapped backend's PutBody got %d calls and the body %d reads, want the body forwarded", inner.bodies, body.reads)
	}
	if got := f.Counts(); got != (fault.Counts{Put: 1, Get: 1}) {
		t.Errorf("counts %v, want one put (and the get that checked it)", got)
	}
	f.SetUnavailable(true)
	if _, err := driver.PutBody(ctx, f, "k", body, body.Size(), backend.PutOptions{}); !errors.Is(err, fault.ErrInjected) {
		t.Errorf("PutBody on an unavailable backend = %v, want ErrInjected", err)
	}
	f.SetUnavailable(false)
	f.LosePutAcks(1)
	if _, err := driver.PutBody(ctx, f, "k", bytes.NewReader([]byte("second")), 6, backend.PutOptions{IfVersion: obj.Version}); !errors.Is(err, backend.ErrPreconditionFailed) {
		t.Errorf("PutBody with a lost ack = %v, want ErrPreconditionFailed", err)
	}
	if got, _ := read(t, f, "k"); got != "second" {
		t.Errorf("after a lost ack the object is %q, want the write performed", got)
	}
}

// A held body write outlives its caller, who closes the body (a spool
// file) once cut off: the write that lands late carries the whole body.
func TestPutBody_HeldWriteLandsWholeAfterTheBodyIsClosed(t *testing.T) {
	ctx := context.Background()
	inner := mem.New(mem.Options{})
	f := fault.New(inner)
	path := filepath.Join(t.TempDir(), "spool")
	data := bytes.Repeat([]byte("late body "), 100_000)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	spool, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	deliver := f.HoldWrites(nil)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := f.PutBody(cctx, "k", spool, int64(len(data)), backend.PutOptions{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("held PutBody = %v, want its context's error", err)
	}
	spool.Close()
	if errs := deliver(); len(errs) != 1 || errs[0] != nil {
		t.Fatalf("delivery = %v, want one write landed", errs)
	}
	if got, _ := read(t, inner, "k"); got != string(data) {
		t.Fatalf("the late write landed %d bytes, want the whole %d-byte body", len(got), len(data))
	}
}
