package s3_test

import (
	"bytes"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/s3"
)

// What the copy probe finds on the real servers (ADR 0041). If a release
// starts enforcing If-None-Match on CopyObject, or stops enforcing
// x-amz-copy-source-if-match, this test fails: update ADR 0041 and the
// conformance harnesses, not the expectation alone.
func TestProbeCopy_SourceConditionEnforced_DestinationConditionIgnored(t *testing.T) {
	eachServer(t, func(t *testing.T, srv oracleServer) {
		bucket := srv.NewBucket(t)
		b := newBackend(t, srv, bucket, s3.ConditionalAuto)
		res, err := b.ProbeCopy(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !res.SourceConditions || res.DestinationConditions || !strings.Contains(res.Evidence, "If-None-Match: * onto an existing object was carried out") {
			t.Errorf("ProbeCopy = %+v, want the source condition enforced and If-None-Match ignored", res)
		}
		if keys := oracleKeys(t, srv, bucket); len(keys) != 0 {
			t.Errorf("after the probes the bucket holds %q, want nothing", keys)
		}
		// What the probe found is what Copy uses.
		if _, err := b.Put(t.Context(), "src", []byte("x"), backend.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Copy(t.Context(), "src", "dst", backend.CopyOptions{IfAbsent: true}); !errors.Is(err, backend.ErrUnsupported) || !strings.Contains(err.Error(), "If-None-Match") {
			t.Errorf("Copy IfAbsent = %v, want ErrUnsupported naming If-None-Match", err)
		}
		if keys := oracleKeys(t, srv, bucket); strings.Join(keys, ",") != "src" {
			t.Errorf("a refused copy left %q", keys)
		}
	})
}

// The copy happens on the server: another client sees the source's bytes
// at the destination, with the source's ETag (MD5 of the bytes).
func TestCopy_OracleSeesTheSourceBytesAtTheDestination(t *testing.T) {
	eachServer(t, func(t *testing.T, srv oracleServer) {
		bucket := srv.NewBucket(t)
		b := newBackend(t, srv, bucket, s3.ConditionalAuto)
		data := []byte("sealed bytes, never downloaded")
		src, err := b.Put(t.Context(), ".cairn-state/app/key", data, backend.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		obj, err := b.Copy(t.Context(), ".cairn-state/app/key", ".cairn-state/.history/app/key/1.1", backend.CopyOptions{IfSourceVersion: src.Version})
		if err != nil {
			t.Fatal(err)
		}
		got, info := oracleGet(t, srv, bucket, ".cairn-state/.history/app/key/1.1")
		if string(got) != string(data) || `"`+info.ETag+`"` != obj.Version || obj.Version != src.Version {
			t.Errorf("oracle reads %q with ETag %s; copy returned version %s, source %s", got, info.ETag, obj.Version, src.Version)
		}
	})
}

// copyServer is an in-memory S3 that implements CopyObject, enforcing
// x-amz-copy-source-if-match and If-None-Match on the copy only as told
// (no real server tested ignores the first, or enforces the second):
// the cases the probe must tell apart.
type copyServer struct {
	enforceSource, enforceDest bool
	// errorBodies is how many copies are answered 200 with an <Error>
	// body first, as S3 does for a copy that fails after it started.
	errorBodies atomic.Int64

	mu      sync.Mutex
	objects map[string][]byte
	copies  atomic.Int64 // CopyObject requests received
	sources []string     // x-amz-copy-source headers received
}

func startCopyServer(t *testing.T, enforceSource, enforceDest bool) (*copyServer, string) {
	cs := &copyServer{enforceSource: enforceSource, enforceDest: enforceDest, objects: map[string][]byte{}}
	srv := httptest.NewServer(http.HandlerFunc(cs.serve))
	t.Cleanup(srv.Close)
	return cs, srv.URL
}

func etagOf(b []byte) string { return fmt.Sprintf(`"%x"`, md5.Sum(b)) }

func (cs *copyServer) serve(w http.ResponseWriter, r *http.Request) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	body, _ := io.ReadAll(r.Body)
	key := strings.TrimPrefix(r.URL.Path, "/b/")
	cur, exists := cs.objects[key]
	switch {
	case r.Method == http.MethodPut && r.Header.Get("X-Amz-Copy-Source") != "":
		cs.copies.Add(1)
		header := r.Header.Get("X-Amz-Copy-Source")
		cs.sources = append(cs.sources, header)
		srcPath, err := url.PathUnescape(header)
		if err != nil {
			s3Error(w, http.StatusBadRequest, "InvalidArgument")
			return
		}
		src, ok := cs.objects[strings.TrimPrefix(srcPath, "b/")]
		if !ok {
			s3Error(w, http.StatusNotFound, "NoSuchKey")
			return
		}
		if m := r.Header.Get("X-Amz-Copy-Source-If-Match"); cs.enforceSource && m != "" && m != etagOf(src) {
			s3Error(w, http.StatusPreconditionFailed, "PreconditionFailed")
			return
		}
		if cs.enforceDest && r.Header.Get("If-None-Match") == "*" && exists {
			s3Error(w, http.StatusPreconditionFailed, "PreconditionFailed")
			return
		}
		if cs.errorBodies.Add(-1) >= 0 {
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code><Message>scripted</Message></Error>`)
			return
		}
		cs.objects[key] = src
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><CopyObjectResult><ETag>%s</ETag><LastModified>2026-01-02T03:04:05.000Z</LastModified></CopyObjectResult>`, etagOf(src))
	case r.Method == http.MethodPut:
		if (r.Header.Get("If-None-Match") == "*" && exists) || (r.Header.Get("If-Match") != "" && (!exists || r.Header.Get("If-Match") != etagOf(cur))) {
			s3Error(w, http.StatusPreconditionFailed, "PreconditionFailed")
			return
		}
		cs.objects[key] = body
		w.Header().Set("ETag", etagOf(body))
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		if !exists {
			if r.Method == http.MethodHead {
				w.WriteHeader(http.StatusNotFound)
				return
			}
			s3Error(w, http.StatusNotFound, "NoSuchKey")
			return
		}
		w.Header().Set("ETag", etagOf(cur))
		if r.Method == http.MethodGet {
			_, _ = w.Write(cur)
		}
	case r.Method == http.MethodDelete:
		if m := r.Header.Get("If-Match"); m != "" && (!exists || m != etagOf(cur)) {
			s3Error(w, http.StatusPreconditionFailed, "PreconditionFailed")
			return
		}
		delete(cs.objects, key)
		w.WriteHeader(http.StatusNoContent)
	}
}

// A server that ignores x-amz-copy-source-if-match is found out by the
// probe, and the backend then refuses conditional copies, sending
// nothing, rather than copying whatever the source holds.
func TestCopy_ServerIgnoringSourceCondition_ProbeFindsIt_CopyRefusedUnsent(t *testing.T) {
	cs, endpoint := startCopyServer(t, false, false)
	b := scriptedBackend(t, endpoint, s3.ConditionalAuto)
	res, err := b.ProbeCopy(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.SourceConditions || res.DestinationConditions || !strings.Contains(res.Evidence, "x-amz-copy-source-if-match was carried out") {
		t.Fatalf("ProbeCopy = %+v, want nothing enforced, evidence naming x-amz-copy-source-if-match", res)
	}
	src, err := b.Put(t.Context(), "src", []byte("x"), backend.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := cs.copies.Load()
	_, err = b.Copy(t.Context(), "src", "dst", backend.CopyOptions{IfSourceVersion: src.Version})
	if !errors.Is(err, backend.ErrUnsupported) || !strings.Contains(err.Error(), "x-amz-copy-source-if-match") {
		t.Errorf("Copy IfSourceVersion on a server that ignores it = %v, want ErrUnsupported naming the header", err)
	}
	if n := cs.copies.Load() - before; n != 0 {
		t.Errorf("%d CopyObject requests sent for a refused copy", n)
	}
	// Without conditions the copy is the server's to do.
	if _, err := b.Copy(t.Context(), "src", "dst", backend.CopyOptions{}); err != nil {
		t.Errorf("unconditional Copy: %v", err)
	}
}

// A server that enforces both conditions gets both used under
// conditional=auto (AWS S3 documents both).
func TestCopy_ServerEnforcingBothConditions_BothUsed(t *testing.T) {
	_, endpoint := startCopyServer(t, true, true)
	b := scriptedBackend(t, endpoint, s3.ConditionalAuto)
	src, err := b.Put(t.Context(), "src", []byte("x"), backend.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Copy(t.Context(), "src", "dst", backend.CopyOptions{IfSourceVersion: src.Version, IfAbsent: true}); err != nil {
		t.Fatalf("Copy with both conditions true: %v", err)
	}
	if _, err := b.Copy(t.Context(), "src", "dst", backend.CopyOptions{IfAbsent: true}); !errors.Is(err, backend.ErrPreconditionFailed) {
		t.Errorf("Copy IfAbsent onto an existing object = %v, want ErrPreconditionFailed", err)
	}
	if _, err := b.Copy(t.Context(), "src", "other", backend.CopyOptions{IfSourceVersion: `"00000000000000000000000000000000"`}); !errors.Is(err, backend.ErrPreconditionFailed) {
		t.Errorf("Copy IfSourceVersion with a wrong version = %v, want ErrPreconditionFailed", err)
	}
}

// S3 can answer a copy 200 with an <Error> body when it fails after it
// started; that is a failure, retried like a 5xx, never a success.
func TestCopy_ErrorInA200Answer_RetriedNotTakenForSuccess(t *testing.T) {
	cs, endpoint := startCopyServer(t, true, false)
	b := scriptedBackend(t, endpoint, s3.ConditionalOff)
	if _, err := b.Put(t.Context(), "src", []byte("x"), backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	cs.errorBodies.Store(1)
	obj, err := b.Copy(t.Context(), "src", "dst", backend.CopyOptions{})
	if err != nil {
		t.Fatalf("Copy after one 200-with-error answer: %v", err)
	}
	if n := cs.copies.Load(); n != 2 || obj.Version != etagOf([]byte("x")) {
		t.Errorf("%d copy requests, version %s; want 2 and the copy's ETag", n, obj.Version)
	}
	cs.errorBodies.Store(100)
	if _, err := b.Copy(t.Context(), "src", "dst2", backend.CopyOptions{}); err == nil || !strings.Contains(err.Error(), "attempts") {
		t.Errorf("Copy answered 200-with-error every time = %v, want a failure after the attempts", err)
	}
}

// The copy source travels in a header, percent-encoded whole: '+' must
// not read as a space, and every byte survives.
func TestCopy_SourceHeaderPercentEncodesTheKey(t *testing.T) {
	cs, endpoint := startCopyServer(t, true, false)
	b := scriptedBackend(t, endpoint, s3.ConditionalOff)
	key := "a+b c/ü?#%&=~_-."
	if _, err := b.Put(t.Context(), key, []byte("x"), backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Copy(t.Context(), key, "dst", backend.CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	cs.mu.Lock()
	got := cs.sources[len(cs.sources)-1]
	cs.mu.Unlock()
	if want := "b/a%2Bb%20c/%C3%BC%3F%23%25%26%3D~_-."; got != want {
		t.Errorf("x-amz-copy-source = %q, want %q", got, want)
	}
}

// conditional=off refuses copy conditions like every other condition,
// and the copy probe never runs.
func TestCopy_ConditionalOff_ConditionsRefusedNoProbe(t *testing.T) {
	cs, endpoint := startCopyServer(t, true, true)
	b := scriptedBackend(t, endpoint, s3.ConditionalOff)
	if n := cs.copies.Load(); n != 0 {
		t.Errorf("ResolveCapabilities under conditional=off sent %d copies", n)
	}
	for _, opts := range []backend.CopyOptions{{IfSourceVersion: etagOf(nil)}, {IfAbsent: true}} {
		if _, err := b.Copy(t.Context(), "src", "dst", opts); !errors.Is(err, backend.ErrUnsupported) || !strings.Contains(err.Error(), "conditional=off") {
			t.Errorf("Copy %+v under conditional=off = %v, want ErrUnsupported naming conditional=off", opts, err)
		}
	}
}

// The copy probe's clean-up warning, like the conditional-write probe's,
// is about objects that were written and stay — never about requests that
// wrote nothing.
func TestProbeCopy_CleanupWarning_OnlyForObjectsWrittenAndLeft(t *testing.T) {
	for _, tc := range []struct {
		name     string
		refuse   string // the method answered 403
		wantWarn bool
	}{
		{"nothing written", http.MethodPut, false},
		{"written, removal refused", http.MethodDelete, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, endpoint := startCopyServer(t, true, false)
			var log bytes.Buffer
			b, _ := fakeBackendCounting(t, endpoint, s3.ConditionalOff, &log, func(r *http.Request) *http.Response {
				if r.Method == tc.refuse {
					return forbidden(r)
				}
				return nil
			})
			_, err := b.ProbeCopy(t.Context())
			if tc.refuse == http.MethodPut && err == nil {
				t.Fatal("the copy probe succeeded though every PUT is refused")
			}
			if warned := strings.Contains(log.String(), "could not remove a copy-probe object"); warned != tc.wantWarn {
				t.Errorf("clean-up warning logged: %v, want %v:\n%s", warned, tc.wantWarn, log.String())
			}
		})
	}
}
