package backendtest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/driver"
)

// The cases of [driver.PutBody]: through the backend's [driver.BodyPutter],
// or Put for a backend without one.

// errBody is the error of a body that fails midway.
var errBody = errors.New("backendtest: the body failed midway")

// failingBody is a body whose reads fail from offset at on.
type failingBody struct {
	data []byte
	at   int64
}

func (f failingBody) ReadAt(p []byte, off int64) (int, error) {
	if off >= f.at {
		return 0, errBody
	}
	n := copy(p, f.data[off:min(int64(len(f.data)), f.at)])
	switch {
	case n == len(p):
		return n, nil
	case off+int64(n) >= f.at:
		return n, errBody
	}
	return n, io.EOF
}

func putBody(t *testing.T, b backend.Backend, key string, body []byte, size int64, opts backend.PutOptions) (backend.Object, error) {
	t.Helper()
	return driver.PutBody(t.Context(), b, key, bytes.NewReader(body), size, opts)
}

func mustPutBody(t *testing.T, b backend.Backend, key string, body []byte, size int64, opts backend.PutOptions) backend.Object {
	t.Helper()
	obj, err := putBody(t, b, key, body, size, opts)
	if err != nil {
		t.Fatalf("PutBody(%q, %d bytes, %+v): %v", key, size, opts, err)
	}
	if obj.Key != key || obj.Size != size || obj.Version == "" {
		t.Errorf("PutBody(%q, %d bytes) returned %+v, want that key and size and a version", key, size, obj)
	}
	return obj
}

func testPutBodyRoundTrip(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	for _, size := range []int64{0, 19, 3<<20 + 17} {
		data := randomBytes(uint64(size), int(size))
		// The body goes on past size: nothing beyond it is written.
		body := append(bytes.Clone(data), "beyond the size"...)
		obj := mustPutBody(t, b, "body/object", body, size, backend.PutOptions{})
		assertContent(t, b, "body/object", data, obj.Version)
	}
	first := mustPutBody(t, b, "body/twice", []byte("first"), 5, backend.PutOptions{})
	second := mustPutBody(t, b, "body/twice", []byte("second"), 6, backend.PutOptions{})
	if first.Version == second.Version {
		t.Errorf("PutBody over an object kept its version %q", first.Version)
	}
	assertContent(t, b, "body/twice", []byte("second"), second.Version)
}

func testPutBodyFailingBody(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	v := mustPut(t, b, "kept", []byte("original"), backend.PutOptions{}).Version
	data := randomBytes(7, 2<<20)
	for _, key := range []string{"kept", "fresh"} {
		for _, at := range []int64{0, 1 << 20} {
			_, err := driver.PutBody(t.Context(), b, key, failingBody{data: data, at: at}, int64(len(data)), backend.PutOptions{})
			if !errors.Is(err, errBody) {
				t.Errorf("PutBody(%q) of a body failing at byte %d = %v, want the body's error", key, at, err)
			}
		}
	}
	assertContent(t, b, "kept", []byte("original"), v)
	assertAbsent(t, b, "fresh")
	assertKeys(t, b, "", []string{"kept"})
}

func testPutBodyShortBody(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	v := mustPut(t, b, "kept", []byte("original"), backend.PutOptions{}).Version
	data := randomBytes(8, 1<<20)
	for _, key := range []string{"kept", "fresh"} {
		_, err := putBody(t, b, key, data, int64(len(data))+10, backend.PutOptions{})
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("PutBody(%q) of a body shorter than its size = %v, want io.ErrUnexpectedEOF", key, err)
		}
	}
	assertContent(t, b, "kept", []byte("original"), v)
	assertAbsent(t, b, "fresh")
}

func testPutBodyConditions(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	ctx := t.Context()
	v := mustPut(t, b, "k", []byte("one"), backend.PutOptions{}).Version
	if !b.Capabilities().ConditionalWrites {
		for _, opts := range []backend.PutOptions{{IfAbsent: true}, {IfVersion: v}} {
			if _, err := putBody(t, b, "k", []byte("two"), 3, opts); !errors.Is(err, backend.ErrUnsupported) {
				t.Errorf("PutBody %+v without conditional writes = %v, want ErrUnsupported", opts, err)
			}
			if _, err := putBody(t, b, "fresh", []byte("two"), 3, opts); !errors.Is(err, backend.ErrUnsupported) {
				t.Errorf("PutBody %+v of an absent key without conditional writes = %v, want ErrUnsupported", opts, err)
			}
		}
		assertContent(t, b, "k", []byte("one"), v)
		assertAbsent(t, b, "fresh")
		return
	}
	if _, err := putBody(t, b, "k", []byte("two"), 3, backend.PutOptions{IfAbsent: true}); !errors.Is(err, backend.ErrPreconditionFailed) {
		t.Errorf("PutBody IfAbsent over an existing object = %v, want ErrPreconditionFailed", err)
	}
	if _, err := putBody(t, b, "absent", []byte("two"), 3, backend.PutOptions{IfVersion: v}); !errors.Is(err, backend.ErrPreconditionFailed) {
		t.Errorf("PutBody IfVersion of an absent key = %v, want ErrPreconditionFailed", err)
	}
	assertAbsent(t, b, "absent")
	v2 := mustPutBody(t, b, "k", []byte("two"), 3, backend.PutOptions{IfVersion: v}).Version
	if _, err := putBody(t, b, "k", []byte("stale"), 5, backend.PutOptions{IfVersion: v}); !errors.Is(err, backend.ErrPreconditionFailed) {
		t.Errorf("PutBody IfVersion with a stale version = %v, want ErrPreconditionFailed", err)
	}
	assertContent(t, b, "k", []byte("two"), v2)
	mustPutBody(t, b, "new", []byte("x"), 1, backend.PutOptions{IfAbsent: true})
	if _, err := driver.PutBody(ctx, b, "both", bytes.NewReader([]byte("x")), 1, backend.PutOptions{IfAbsent: true, IfVersion: v2}); err == nil {
		t.Error("PutBody with IfAbsent and IfVersion both set succeeded, want an error")
	}
	assertAbsent(t, b, "both")
}

func testPutBodyContextCancelled(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	v := mustPut(t, b, "kept", []byte("original"), backend.PutOptions{}).Version
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	data := randomBytes(9, 1<<20)
	for _, key := range []string{"kept", "new"} {
		if _, err := driver.PutBody(ctx, b, key, bytes.NewReader(data), int64(len(data)), backend.PutOptions{}); !errors.Is(err, context.Canceled) {
			t.Errorf("PutBody(%q) with a cancelled context = %v, want context.Canceled", key, err)
		}
	}
	// Cancelled while the body is being read.
	cancelling := cancelAfter{ReaderAt: bytes.NewReader(data), after: 256 << 10}
	ctx, cancelling.cancel = context.WithCancel(t.Context())
	defer cancelling.cancel()
	if _, err := driver.PutBody(ctx, b, "new", &cancelling, int64(len(data)), backend.PutOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("PutBody cancelled while its body is read = %v, want context.Canceled", err)
	}
	assertAbsent(t, b, "new")
	assertContent(t, b, "kept", []byte("original"), v)
}

// cancelAfter is a body that cancels its context once a read reaches
// byte after.
type cancelAfter struct {
	io.ReaderAt
	after  int64
	cancel context.CancelFunc
}

func (c *cancelAfter) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) >= c.after {
		c.cancel()
	}
	return c.ReaderAt.ReadAt(p, off)
}
