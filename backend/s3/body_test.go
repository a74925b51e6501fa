package s3_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cairnhq/state/backend"
)

// tearingServer is an S3 stand-in whose first `tear` PUTs read half of
// their body and drop the connection (a request torn on the wire), and
// whose later PUTs keep the body they received, checking it against the
// x-amz-content-sha256 the client signed.
type tearingServer struct {
	*httptest.Server
	tear     int64
	puts     atomic.Int64
	mu       sync.Mutex
	received map[string][]byte
}

func newTearingServer(t *testing.T, tear int64) *tearingServer {
	s := &tearingServer{tear: tear, received: map[string][]byte{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut {
			s3Error(w, http.StatusNotImplemented, "NotImplemented")
			return
		}
		if n := s.puts.Add(1); n <= s.tear {
			_, _ = io.CopyN(io.Discard, r.Body, r.ContentLength/2)
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != r.Header.Get("X-Amz-Content-Sha256") {
			s3Error(w, http.StatusBadRequest, "XAmzContentSHA256Mismatch")
			return
		}
		s.mu.Lock()
		s.received[r.URL.Path] = body
		s.mu.Unlock()
		w.Header().Set("ETag", `"0123456789abcdef0123456789abcdef"`)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *tearingServer) body(path string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.received[path]
}

// A retry (ADR 0016) sends the body from its start: the attempt torn
// halfway through its body is followed by one that sends all of it, signed
// with its whole SHA-256.
func TestPutBody_RetryAfterATornRequest_SendsTheWholeBodyAgain(t *testing.T) {
	srv := newTearingServer(t, 1)
	b := fakeBackend(t, srv.URL, nil, nil)
	data := bytes.Repeat([]byte("0123456789abcdef"), 256<<10) // 4 MiB
	obj, err := b.PutBody(t.Context(), "k", bytes.NewReader(data), int64(len(data)), backend.PutOptions{})
	if err != nil {
		t.Fatalf("PutBody with its first attempt torn: %v", err)
	}
	if obj.Size != int64(len(data)) {
		t.Errorf("Size = %d, want %d", obj.Size, len(data))
	}
	if n := srv.puts.Load(); n != 2 {
		t.Errorf("%d PUT requests, want 2 (the torn one and its retry)", n)
	}
	if got := srv.body("/b/k"); !bytes.Equal(got, data) {
		t.Errorf("the server received %d bytes, want the whole %d-byte body", len(got), len(data))
	}
}

// A body that fails is the caller's error: no retry, and nothing reaches
// the server (the SDK reads the whole body for its signature first).
func TestPutBody_FailingBody_NotRetried_NothingSent(t *testing.T) {
	srv := newTearingServer(t, 0)
	b := fakeBackend(t, srv.URL, nil, nil)
	errRead := errors.New("the spool failed")
	data := make([]byte, 1<<20)
	for _, body := range []io.ReaderAt{
		failAt{data: data, at: 512 << 10, err: errRead},
		bytes.NewReader(data[:1000]), // shorter than its size
	} {
		_, err := b.PutBody(t.Context(), "k", body, int64(len(data)), backend.PutOptions{})
		if !errors.Is(err, errRead) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("PutBody of a failing body = %v, want its error", err)
		}
	}
	if n := srv.puts.Load(); n != 0 {
		t.Errorf("%d PUT requests reached the server, want none", n)
	}
}

type failAt struct {
	data []byte
	at   int64
	err  error
}

func (f failAt) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.at {
		n := copy(p, f.data[off:max(off, f.at)])
		return n, f.err
	}
	return copy(p, f.data[off:]), nil
}
