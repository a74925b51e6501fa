package s3_test

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/minio/minio-go/v7"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/s3"
	"github.com/cairnhq/state/testutil/garage"
	"github.com/cairnhq/state/testutil/versitygw"
)

// countingTransport counts the requests it sends, by method; intercept,
// when set, may answer a request in the server's place.
type countingTransport struct {
	next      http.RoundTripper
	intercept func(*http.Request) *http.Response
	mu        sync.Mutex
	n         map[string]int
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n[r.Method]++
	c.mu.Unlock()
	if c.intercept != nil {
		if resp := c.intercept(r); resp != nil {
			return resp, nil
		}
	}
	return c.next.RoundTrip(r)
}

// forbidden is a 403 AccessDenied answer to r.
func forbidden(r *http.Request) *http.Response {
	body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>scripted</Message></Error>`
	return &http.Response{
		StatusCode: http.StatusForbidden, Status: "403 Forbidden", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"application/xml"}},
		Body:    io.NopCloser(strings.NewReader(body)),
		Request: r, ContentLength: int64(len(body)),
	}
}

// fakeBackendCounting opens a backend on a scripted server through a
// counting client (intercept may answer in the server's place), logging
// into log when it is not nil.
func fakeBackendCounting(t *testing.T, endpoint string, mode s3.ConditionalMode, log *bytes.Buffer, intercept func(*http.Request) *http.Response) (*s3.Backend, *countingTransport) {
	t.Helper()
	client, counts := countingClient(t)
	counts.intercept = intercept
	var w io.Writer = t.Output()
	if log != nil {
		w = io.MultiWriter(log, t.Output())
	}
	b, err := s3.NewBackend(t.Context(), s3.Options{
		Bucket: "b", Endpoint: endpoint, Region: "us-east-1", PathStyle: true, Conditional: mode,
		Credentials: credentials.NewStaticCredentialsProvider("AK", "SK", ""),
		Logger:      slog.New(slog.NewTextHandler(w, nil)),
		HTTPClient:  client,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, counts
}

func (c *countingTransport) count(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[method]
}

func countingClient(t *testing.T) (*http.Client, *countingTransport) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	c := &countingTransport{next: tr, n: map[string]int{}}
	return &http.Client{Transport: c}, c
}

// Read-only use of a conditional=auto backend — what ls and get do —
// writes nothing: no probe, no PUT, no DELETE.
func TestReadOnlyUse_AutoMode_SendsNoWrite(t *testing.T) {
	srv := versitygw.Start(t)
	bucket := srv.NewBucket(t)
	if _, err := srv.Minio(t).PutObject(t.Context(), bucket, ".cairn-state/x", strings.NewReader("x"), 1, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	client, counts := countingClient(t)
	opts := srv.Options(bucket)
	opts.HTTPClient = client
	b, err := s3.NewBackend(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Capabilities().ConditionalWrites {
		t.Error("an unresolved auto backend reports conditional writes")
	}
	if _, _, err := get(t, b, ".cairn-state/x"); err != nil {
		t.Fatal(err)
	}
	if err := b.List(t.Context(), "", func(backend.Object) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Now(t.Context()); err != nil {
		t.Fatal(err)
	}
	if p, d := counts.count(http.MethodPut), counts.count(http.MethodDelete); p != 0 || d != 0 {
		t.Errorf("read-only use sent %d PUTs and %d DELETEs, want none", p, d)
	}
	if keys := oracleKeys(t, srv, bucket); len(keys) != 1 {
		t.Errorf("the bucket holds %q, want only the object put by the test", keys)
	}
}

// Before resolution a conditional call is refused, saying why, and writes
// nothing; after it, the probe's finding holds.
func TestConditionalCall_BeforeResolution_UnsupportedSayingNotResolved(t *testing.T) {
	b, counts := fakeBackendCounting(t, fakeS3(t, false).URL, s3.ConditionalAuto, nil, nil)
	_, err := b.Put(t.Context(), "k", []byte("v"), backend.PutOptions{IfAbsent: true})
	if !errors.Is(err, backend.ErrUnsupported) || !strings.Contains(err.Error(), "not resolved") || !strings.Contains(err.Error(), "ResolveCapabilities") {
		t.Errorf("Put IfAbsent before resolution = %v, want ErrUnsupported saying the capabilities were not resolved", err)
	}
	if err := b.Delete(t.Context(), "k", backend.DeleteOptions{IfVersion: `"x"`}); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("Delete IfVersion before resolution = %v, want ErrUnsupported", err)
	}
	if n := counts.count(http.MethodPut) + counts.count(http.MethodDelete) + counts.count(http.MethodHead); n != 0 {
		t.Errorf("refused conditional calls sent %d requests", n)
	}
	caps, err := b.ResolveCapabilities(t.Context())
	if err != nil || !caps.ConditionalWrites || !b.Capabilities().ConditionalWrites {
		t.Fatalf("ResolveCapabilities = %+v, %v; want conditional writes", caps, err)
	}
	if _, err := b.Put(t.Context(), "k", []byte("v"), backend.PutOptions{IfAbsent: true}); err != nil {
		t.Errorf("Put IfAbsent after resolution: %v", err)
	}
}

// Concurrent callers share one probe, and its finding is kept.
func TestResolveCapabilities_ConcurrentCallersShareOneProbe(t *testing.T) {
	b, counts := fakeBackendCounting(t, fakeS3(t, false).URL, s3.ConditionalAuto, nil, nil)
	var wg sync.WaitGroup
	var yes atomic.Int32
	for range 8 {
		wg.Go(func() {
			caps, err := b.ResolveCapabilities(t.Context())
			if err != nil {
				t.Error(err)
			}
			if caps.ConditionalWrites {
				yes.Add(1)
			}
		})
	}
	wg.Wait()
	if yes.Load() != 8 {
		t.Errorf("%d of 8 callers saw conditional writes", yes.Load())
	}
	// One resolution: what a lone caller's sends (the conditional-write
	// probe's four PutObjects, ADR 0005's steps 1–4, and the copy probe's
	// PutObjects and CopyObjects, ADR 0041).
	lone, loneCounts := fakeBackendCounting(t, fakeS3(t, false).URL, s3.ConditionalAuto, nil, nil)
	if _, err := lone.ResolveCapabilities(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := loneCounts.count(http.MethodPut)
	if n := counts.count(http.MethodPut); n != want || want < 4 {
		t.Errorf("8 concurrent resolutions sent %d PUTs, want one resolution's %d", n, want)
	}
	if _, err := b.ResolveCapabilities(t.Context()); err != nil || counts.count(http.MethodPut) != want {
		t.Errorf("a later resolution probed again (%d PUTs, %v)", counts.count(http.MethodPut), err)
	}
}

// A probe that fails is not kept: the next resolution probes again.
func TestResolveCapabilities_FailedProbeIsRetriedNextTime(t *testing.T) {
	nodes := newFakeCluster(t, 1)
	nodes[0].set(node503)
	b, _ := fakeBackendCounting(t, nodes[0].URL, s3.ConditionalAuto, nil, nil)
	if _, err := b.ResolveCapabilities(t.Context()); err == nil {
		t.Fatal("a probe against 503s succeeded")
	}
	nodes[0].set(nodeOK)
	caps, err := b.ResolveCapabilities(t.Context())
	if err != nil {
		t.Fatalf("second resolution, server healthy: %v", err)
	}
	// The fake node ignores conditions.
	if caps.ConditionalWrites {
		t.Error("a server that ignores conditions was found to enforce them")
	}
}

// The clean-up warning is about an object that was written and could not
// be removed — not about requests that wrote nothing.
func TestProbe_CleanupWarning_OnlyWhenTheObjectWasWrittenAndStays(t *testing.T) {
	g := garage.Start(t)
	bucket := g.NewBucket(t)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + closed.Addr().String()
	closed.Close()
	for _, tc := range []struct {
		name string
		edit func(*s3.Options)
	}{
		{"missing bucket", func(o *s3.Options) { o.Bucket = "no-such-bucket-here" }},
		{"wrong region", func(o *s3.Options) { o.Region = "us-east-1" }},
		{"wrong secret", func(o *s3.Options) {
			o.Credentials = credentials.NewStaticCredentialsProvider(g.AccessKey, strings.Repeat("0", 64), "")
		}},
		{"unknown access key", func(o *s3.Options) {
			o.Credentials = credentials.NewStaticCredentialsProvider("GK000000000000000000000000", g.SecretKey, "")
		}},
		{"endpoint down", func(o *s3.Options) { o.Endpoint = down }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log bytes.Buffer
			opts := g.Options(bucket)
			opts.HTTPClient = httpClient(t)
			opts.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(&log, t.Output()), nil))
			tc.edit(&opts)
			b, err := s3.NewBackend(t.Context(), opts)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if _, err := b.ResolveCapabilities(t.Context()); err == nil {
				t.Fatal("the probe succeeded")
			}
			if strings.Contains(log.String(), "could not remove the probe object") {
				t.Errorf("nothing was written, yet the log warns about the probe object:\n%s", log.String())
			}
		})
	}
	if keys := oracleKeys(t, g, bucket); len(keys) != 0 {
		t.Errorf("failed probes left %q in the bucket", keys)
	}

	// Written, then refused its removal: the warning is due.
	t.Run("written, removal refused", func(t *testing.T) {
		srv := fakeS3(t, false)
		var log bytes.Buffer
		b, _ := fakeBackendCounting(t, srv.URL, s3.ConditionalAuto, &log, func(r *http.Request) *http.Response {
			if r.Method == http.MethodDelete {
				return forbidden(r)
			}
			return nil
		})
		if _, err := b.ResolveCapabilities(t.Context()); err == nil {
			t.Fatal("the probe succeeded though deletes are refused")
		}
		if !strings.Contains(log.String(), "could not remove the probe object") {
			t.Errorf("the probe object was written and not removed, but no warning says so:\n%s", log.String())
		}
	})
}
