//go:build linux

package s3_test

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/s3"
	"github.com/cairnhq/state/internal/s3diag"
	"github.com/cairnhq/state/internal/testserver"
)

// An endpoint that accepts connections and never answers — a hung server,
// a proxy with a dead upstream — must not hang its caller: with the
// default options one operation fails within 30 s, naming the endpoint and
// the timeout. (cairn-state ls printed nothing for 120 s against one.)
func TestHungEndpoint_AcceptsNeverAnswers_FailsWithin30sNamingIt(t *testing.T) {
	t.Parallel()
	endpoint := testserver.SilentEndpoint(t)
	b := defaultBackend(t, endpoint)
	elapsed, err := failsWithin(t, "List against a server that never answers", 30*time.Second, func() error {
		return b.List(t.Context(), "", func(backend.Object) error { return nil })
	})
	if elapsed < s3diag.DefaultResponseTimeout {
		t.Errorf("List gave up after %v, before one response timeout (%v)", elapsed, s3diag.DefaultResponseTimeout)
	}
	errorSays(t, err, endpoint, "sent no response headers within 8s", "response timeout", "3 attempts")
	if errors.Is(err, backend.ErrNotFound) || errors.Is(err, backend.ErrPermission) {
		t.Errorf("a hung endpoint reads as %v", err)
	}
	var timeout interface{ Timeout() bool }
	if !errors.As(err, &timeout) || !timeout.Timeout() {
		t.Errorf("error %v does not report Timeout()", err)
	}
}

// A listener that never accepts: its backlog is full, so connecting hangs
// (SYNs are dropped). The connect timeout gives it up.
func TestHungEndpoint_NeverAccepts_ConnectTimeoutNamesIt(t *testing.T) {
	t.Parallel()
	endpoint := testserver.NeverAcceptingEndpoint(t)
	b := defaultBackend(t, endpoint)
	_, err := failsWithin(t, "Put against a listener that never accepts", 30*time.Second, func() error {
		_, err := b.Put(t.Context(), "k", []byte("v"), backend.PutOptions{})
		return err
	})
	errorSays(t, err, endpoint, "did not accept a connection within 5s", "connect timeout")
}

// failsWithin runs op, named what in messages, which must fail, and at
// most limit after it started; it returns how long op took and its error.
func failsWithin(t *testing.T, what string, limit time.Duration, op func() error) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	err := op()
	elapsed := time.Since(start)
	if err == nil {
		t.Fatalf("%s succeeded", what)
	}
	t.Logf("after %v: %v", elapsed.Round(time.Millisecond), err)
	if elapsed > limit {
		t.Errorf("%s took %v, want at most %v", what, elapsed, limit)
	}
	return elapsed, err
}

// errorSays fails the test for each of wants that err's message lacks.
func errorSays(t *testing.T, err error, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// defaultBackend opens a backend on endpoint with every timeout and retry
// at its default, as a user's URL without options would.
func defaultBackend(t *testing.T, endpoint string) *s3.Backend {
	t.Helper()
	opts, _, err := s3.ParseURL("s3://b?region=us-east-1&endpoint=" + endpoint)
	if err != nil {
		t.Fatal(err)
	}
	opts.Credentials = credentials.NewStaticCredentialsProvider("AK", "SK", "")
	opts.HTTPClient = httpClient(t)
	b, err := s3.NewBackend(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// A stopped server (connection refused) is retried briefly — a restart
// takes a moment — and reported naming it, well within a second.
func TestStoppedEndpoint_ConnectionRefused_FailsFastNamingIt(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + l.Addr().String()
	l.Close()
	b := defaultBackend(t, endpoint)
	_, err = failsWithin(t, "Get against a closed port", time.Second, func() error {
		_, _, err := b.Get(t.Context(), "k")
		return err
	})
	errorSays(t, err, endpoint, "3 attempts", "connection refused")
}

// A server that accepts and never reads: a large request body stops
// flowing once the socket buffers are full, and the response timeout
// gives it up then, not after the attempt timeout.
func TestHungEndpoint_NeverReadsTheBody_GivenUpAfterTheResponseTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(held)
				return
			}
			held <- c // never read
		}
	}()
	t.Cleanup(func() {
		l.Close()
		for c := range held {
			c.Close()
		}
	})
	b := fakeBackend(t, "http://"+l.Addr().String(), nil, func(o *s3.Options) {
		o.ResponseTimeout = 500 * time.Millisecond
		o.MaxAttempts = 1
	})
	// The body stops flowing long before the limit.
	_, err = failsWithin(t, "Put to a server that never reads", 10*time.Second, func() error {
		_, err := b.Put(t.Context(), "big", make([]byte, 64<<20), backend.PutOptions{})
		return err
	})
	errorSays(t, err, "stopped taking the request")
}
