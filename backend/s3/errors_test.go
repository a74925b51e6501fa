package s3_test

import (
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/s3"
)

// The cases here need answers no real server gives on demand (AWS's 409
// ConditionalRequestConflict under a race, a server that refuses the
// headers), so a scripted HTTP server stands in for S3. Everything else is
// tested against real servers.

// scriptedS3 answers unconditional requests like S3 and conditional PUTs
// with conditional(n), n counting conditional PUTs from 1.
func scriptedS3(t *testing.T, conditional func(n int64, w http.ResponseWriter)) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Match") != "" {
			conditional(n.Add(1), w)
			return
		}
		switch r.Method {
		case http.MethodPut:
			w.Header().Set("ETag", `"0123456789abcdef0123456789abcdef"`)
		case http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func s3Error(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>scripted</Message></Error>`, code)
}

// scriptedBackend opens a backend on a scripted server and resolves its
// capabilities (the probe, under conditional=auto).
func scriptedBackend(t *testing.T, endpoint string, mode s3.ConditionalMode) *s3.Backend {
	t.Helper()
	b, err := s3.NewBackend(t.Context(), s3.Options{
		Bucket: "b", Endpoint: endpoint, Region: "us-east-1", PathStyle: true, Conditional: mode,
		Credentials: credentials.NewStaticCredentialsProvider("AK", "SK", ""),
		Logger:      slog.New(slog.NewTextHandler(t.Output(), nil)),
		HTTPClient:  httpClient(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if _, err := b.ResolveCapabilities(t.Context()); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPut_ConditionalRequestConflict_RetriedThenSucceeds(t *testing.T) {
	srv, n := scriptedS3(t, func(n int64, w http.ResponseWriter) {
		if n <= 2 {
			s3Error(w, http.StatusConflict, "ConditionalRequestConflict")
			return
		}
		w.Header().Set("ETag", `"fedcba9876543210fedcba9876543210"`)
	})
	b := scriptedBackend(t, srv.URL, s3.ConditionalOn)
	obj, err := b.Put(t.Context(), "lock", []byte("x"), backend.PutOptions{IfAbsent: true})
	if err != nil {
		t.Fatalf("Put after two 409s = %v, want success on the third attempt", err)
	}
	if got := n.Load(); got != 3 || obj.Version != `"fedcba9876543210fedcba9876543210"` {
		t.Errorf("attempts = %d, version %s; want 3 and the third answer's ETag", got, obj.Version)
	}
}

func TestPut_ConditionalRequestConflictPersisting_PreconditionFailed(t *testing.T) {
	srv, n := scriptedS3(t, func(_ int64, w http.ResponseWriter) {
		s3Error(w, http.StatusConflict, "ConditionalRequestConflict")
	})
	b := scriptedBackend(t, srv.URL, s3.ConditionalOn)
	_, err := b.Put(t.Context(), "lock", []byte("x"), backend.PutOptions{IfVersion: `"0123456789abcdef0123456789abcdef"`})
	if !errors.Is(err, backend.ErrPreconditionFailed) {
		t.Fatalf("Put under a persisting 409 = %v, want ErrPreconditionFailed", err)
	}
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "ConditionalRequestConflict" {
		t.Errorf("errors.As does not reach the 409: %v", err)
	}
	if got := n.Load(); got != 3 {
		t.Errorf("attempts = %d, want 3 (DefaultMaxAttempts)", got)
	}
}

func TestResolveCapabilities_ServerRefusingConditionalHeaders_NoSupport(t *testing.T) {
	srv, _ := scriptedS3(t, func(_ int64, w http.ResponseWriter) {
		s3Error(w, http.StatusNotImplemented, "NotImplemented")
	})
	b := scriptedBackend(t, srv.URL, s3.ConditionalAuto)
	if b.Capabilities().ConditionalWrites {
		t.Error("a server answering 501 to conditional headers was reported as supporting them")
	}
}

func TestPut_ConditionalOnServerAnswering501_Unsupported(t *testing.T) {
	srv, _ := scriptedS3(t, func(_ int64, w http.ResponseWriter) {
		s3Error(w, http.StatusNotImplemented, "NotImplemented")
	})
	b := scriptedBackend(t, srv.URL, s3.ConditionalOn)
	_, err := b.Put(t.Context(), "k", []byte("x"), backend.PutOptions{IfAbsent: true})
	if !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("Put IfAbsent answered 501 = %v, want ErrUnsupported", err)
	}
}

func TestPut_412_PreconditionFailedNamingKeyAndBucket(t *testing.T) {
	srv, _ := scriptedS3(t, func(_ int64, w http.ResponseWriter) {
		s3Error(w, http.StatusPreconditionFailed, "PreconditionFailed")
	})
	b := scriptedBackend(t, srv.URL, s3.ConditionalOn)
	_, err := b.Put(t.Context(), "state/lock", []byte("x"), backend.PutOptions{IfAbsent: true})
	if !errors.Is(err, backend.ErrPreconditionFailed) {
		t.Fatalf("Put answered 412 = %v, want ErrPreconditionFailed", err)
	}
	for _, want := range []string{`"state/lock"`, `bucket "b"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

// fakeS3 keeps objects in memory and enforces PutObject conditions like
// AWS; with ignoreDeleteIfMatch it deletes whatever If-Match says, as
// MinIO does (observed on a 2026-02 build).
func fakeS3(t *testing.T, ignoreDeleteIfMatch bool) *httptest.Server {
	var mu sync.Mutex
	objects := map[string][]byte{}
	etagOf := func(b []byte) string { return fmt.Sprintf(`"%x"`, md5.Sum(b)) }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		body, _ := io.ReadAll(r.Body)
		cur, exists := objects[r.URL.Path]
		ifMatch, ifNoneMatch := r.Header.Get("If-Match"), r.Header.Get("If-None-Match")
		switch r.Method {
		case http.MethodPut:
			if (ifNoneMatch == "*" && exists) || (ifMatch != "" && (!exists || ifMatch != etagOf(cur))) {
				s3Error(w, http.StatusPreconditionFailed, "PreconditionFailed")
				return
			}
			objects[r.URL.Path] = body
			w.Header().Set("ETag", etagOf(body))
		case http.MethodGet:
			if !exists {
				s3Error(w, http.StatusNotFound, "NoSuchKey")
				return
			}
			w.Header().Set("ETag", etagOf(cur))
			_, _ = w.Write(cur)
		case http.MethodDelete:
			if !ignoreDeleteIfMatch && ifMatch != "" && (!exists || ifMatch != etagOf(cur)) {
				s3Error(w, http.StatusPreconditionFailed, "PreconditionFailed")
				return
			}
			delete(objects, r.URL.Path)
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestProbe_PutConditionsEnforcedDeleteIfMatchIgnored_NoConditionalWrites(t *testing.T) {
	b := scriptedBackend(t, fakeS3(t, true).URL, s3.ConditionalAuto)
	if b.Capabilities().ConditionalWrites {
		t.Error("a server that ignores If-Match on DeleteObject was reported as supporting conditional writes")
	}
	res, err := b.Probe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Supported || !res.PutConditions || res.DeleteConditions || !strings.Contains(res.Evidence, "DeleteObject") {
		t.Errorf("Probe = %+v, want put conditions only, evidence naming DeleteObject", res)
	}
}

func TestProbe_AllConditionsEnforced_Supported(t *testing.T) {
	b := scriptedBackend(t, fakeS3(t, false).URL, s3.ConditionalAuto)
	res, err := b.Probe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !b.Capabilities().ConditionalWrites || !res.Supported || !res.PutConditions || !res.DeleteConditions {
		t.Errorf("Probe = %+v, capabilities %+v; want everything supported", res, b.Capabilities())
	}
}
