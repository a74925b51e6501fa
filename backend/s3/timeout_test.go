package s3_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/state/backend/s3"
)

// bodyServer answers every GET with headers for a 1,000-byte object and
// then the body as send writes it.
func bodyServer(t *testing.T, send func(w http.ResponseWriter, f http.Flusher, done <-chan struct{})) string {
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		w.Header().Set("ETag", `"0123456789abcdef0123456789abcdef"`)
		w.WriteHeader(http.StatusOK)
		f := w.(http.Flusher)
		f.Flush()
		send(w, f, done)
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	return srv.URL
}

// A body that stops flowing is given up after the response timeout, with
// an error naming the server; one that keeps flowing, however slowly, is
// read to the end although it takes longer than that.
func TestGet_ResponseTimeoutIsASilenceLimitOnTheBody(t *testing.T) {
	const limit = 300 * time.Millisecond
	edit := func(o *s3.Options) { o.ResponseTimeout = limit }

	stalled := bodyServer(t, func(w http.ResponseWriter, f http.Flusher, done <-chan struct{}) {
		_, _ = w.Write([]byte(strings.Repeat("x", 100)))
		f.Flush()
		<-done
	})
	b := fakeBackend(t, stalled, nil, edit)
	rc, _, err := b.Get(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	n, err := io.Copy(io.Discard, rc)
	rc.Close()
	if err == nil || n != 100 {
		t.Fatalf("read %d bytes, %v; want the 100 sent, then an error", n, err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the stalled body was given up after %v", d)
	}
	if !strings.Contains(err.Error(), "stopped sending the response body for 300ms") {
		t.Errorf("error %q does not say the body stalled", err)
	}
	var timeout interface{ Timeout() bool }
	if !errors.As(err, &timeout) || !timeout.Timeout() {
		t.Errorf("error %v does not report Timeout()", err)
	}

	slow := bodyServer(t, func(w http.ResponseWriter, f http.Flusher, done <-chan struct{}) {
		for range 10 { // 10 × 100 bytes, 100 ms apart: 1 s in all
			_, _ = w.Write([]byte(strings.Repeat("y", 100)))
			f.Flush()
			select {
			case <-time.After(100 * time.Millisecond):
			case <-done:
				return
			}
		}
	})
	b = fakeBackend(t, slow, nil, edit)
	rc, _, err = b.Get(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	n, err = io.Copy(io.Discard, rc)
	rc.Close()
	if err != nil || n != 1000 {
		t.Errorf("a slow but steady body: read %d bytes in %v, %v; want all 1000", n, time.Since(start), err)
	}
}

// The attempt timeout caps one attempt as a whole, whatever the other
// limits allow.
func TestAttemptTimeout_CapsOneAttempt(t *testing.T) {
	nodes := newFakeCluster(t, 1)
	nodes[0].set(nodeHang)
	b := fakeBackend(t, nodes[0].URL, nil, func(o *s3.Options) {
		o.ResponseTimeout = 10 * time.Second
		o.AttemptTimeout = 200 * time.Millisecond
		o.MaxAttempts = 2
	})
	start := time.Now()
	_, err := b.Now(t.Context())
	if err == nil {
		t.Fatal("Now against a hung server succeeded")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("two 200ms attempts took %v", d)
	}
	if !strings.Contains(err.Error(), "did not answer the request within 200ms (attempt timeout)") || !strings.Contains(err.Error(), "2 attempts") {
		t.Errorf("error %q does not name the attempt timeout and the 2 attempts", err)
	}
	if got := nodes[0].requests.Load(); got != 2 {
		t.Errorf("%d requests, want 2", got)
	}
}
