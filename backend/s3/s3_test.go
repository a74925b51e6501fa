package s3_test

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go"
	"github.com/minio/minio-go/v7"
	"go.uber.org/goleak"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/s3"
	"github.com/cairnhq/state/testutil/garage"
	"github.com/cairnhq/state/testutil/versitygw"
)

// oracleServer is a server the tests can inspect with minio-go.
type oracleServer interface {
	server
	Minio(t testing.TB) *minio.Client
}

// eachServer runs fn as a subtest against a fresh versitygw and a fresh
// Garage.
func eachServer(t *testing.T, fn func(t *testing.T, srv oracleServer)) {
	t.Run("versitygw", func(t *testing.T) { fn(t, versitygw.Start(t)) })
	t.Run("garage", func(t *testing.T) { fn(t, garage.Start(t)) })
}

// oracleKeys lists the raw bucket with minio-go, probe leftovers included.
func oracleKeys(t *testing.T, srv oracleServer, bucket string) []string {
	t.Helper()
	var keys []string
	for o := range srv.Minio(t).ListObjects(t.Context(), bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("oracle list %q: %v", bucket, o.Err)
		}
		keys = append(keys, o.Key)
	}
	return keys
}

func oracleGet(t *testing.T, srv oracleServer, bucket, key string) ([]byte, minio.ObjectInfo) {
	t.Helper()
	obj, err := srv.Minio(t).GetObject(t.Context(), bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatalf("oracle get %q: %v", key, err)
	}
	defer obj.Close()
	data, err := io.ReadAll(obj)
	if err != nil {
		t.Fatalf("oracle read %q: %v", key, err)
	}
	info, err := obj.Stat()
	if err != nil {
		t.Fatalf("oracle stat %q: %v", key, err)
	}
	return data, info
}

func TestPut_OracleSeesExactBytesAtExactKeyWithReportedVersion(t *testing.T) {
	eachServer(t, func(t *testing.T, srv oracleServer) {
		bucket := srv.NewBucket(t)
		b := newBackend(t, srv, bucket, s3.ConditionalAuto)
		data := make([]byte, 256*3)
		for i := range data {
			data[i] = byte(i)
		}
		const key = ".cairn-state/app/ключ with spaces+plus"
		obj, err := b.Put(t.Context(), key, data, backend.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, info := oracleGet(t, srv, bucket, key)
		if !bytes.Equal(got, data) {
			t.Errorf("the bucket holds %d bytes at %q, want the %d written", len(got), key, len(data))
		}
		if want := strings.Trim(obj.Version, `"`); info.ETag != want {
			t.Errorf("Put reported version %s, the bucket's ETag is %q", obj.Version, info.ETag)
		}
		if keys := oracleKeys(t, srv, bucket); !slices.Equal(keys, []string{key}) {
			t.Errorf("the bucket holds keys %q, want only %q", keys, key)
		}
	})
}

func TestGet_ReadsWhatAnotherClientWrote(t *testing.T) {
	eachServer(t, func(t *testing.T, srv oracleServer) {
		bucket := srv.NewBucket(t)
		b := newBackend(t, srv, bucket, s3.ConditionalAuto)
		want := []byte("written by minio-go")
		if _, err := srv.Minio(t).PutObject(t.Context(), bucket, "x/y", bytes.NewReader(want), int64(len(want)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		rc, obj, err := b.Get(t.Context(), "x/y")
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		got, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) || obj.Size != int64(len(want)) {
			t.Errorf("Get = %q (size %d), want %q", got, obj.Size, want)
		}
	})
}

func TestResolveCapabilities_AutoProbe_LeavesNothingInTheBucket(t *testing.T) {
	eachServer(t, func(t *testing.T, srv oracleServer) {
		bucket := srv.NewBucket(t)
		newBackend(t, srv, bucket, s3.ConditionalAuto)
		if keys := oracleKeys(t, srv, bucket); len(keys) != 0 {
			t.Errorf("after the probe the bucket holds %q, want nothing", keys)
		}
	})
}

func TestProbe_Versitygw_FindsConditionalWritesEnforced(t *testing.T) {
	srv := versitygw.Start(t)
	b := newBackend(t, srv, srv.NewBucket(t), s3.ConditionalAuto)
	if !b.Capabilities().ConditionalWrites {
		t.Fatal("versitygw enforces conditional writes, the probe reported none")
	}
	res, err := b.Probe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Supported || !res.PutConditions || !res.DeleteConditions {
		t.Errorf("Probe = %+v, want everything enforced", res)
	}
}

// Garage 2.5.0 accepts If-None-Match and If-Match and ignores them. If a
// release starts enforcing them this test fails: update ADR 0006 and the
// servers table, not the test's expectation alone.
func TestProbe_Garage_DetectsIgnoredConditionsAsNoSupport(t *testing.T) {
	srv := garage.Start(t)
	b := newBackend(t, srv, srv.NewBucket(t), s3.ConditionalAuto)
	if b.Capabilities().ConditionalWrites {
		t.Fatal("the probe reported conditional writes on Garage, which ignores the headers")
	}
	res, err := b.Probe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Supported || res.PutConditions || res.DeleteConditions || !strings.Contains(res.Evidence, "If-None-Match") {
		t.Errorf("Probe = %+v, want nothing enforced, evidence naming If-None-Match", res)
	}
}

// Forcing conditions on for a server that ignores them is the operator's
// explicit choice; the backend then sends them as asked. This pins that
// Garage really ignores them (the reason auto must probe).
func TestPut_GarageConditionalOn_ServerOverwritesDespiteIfAbsent(t *testing.T) {
	srv := garage.Start(t)
	bucket := srv.NewBucket(t)
	b := newBackend(t, srv, bucket, s3.ConditionalOn)
	if _, err := b.Put(t.Context(), "k", []byte("first"), backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(t.Context(), "k", []byte("second"), backend.PutOptions{IfAbsent: true}); err != nil {
		t.Fatalf("Garage refused If-None-Match: * (%v): it now enforces conditions; update ADR 0006", err)
	}
	if got, _ := oracleGet(t, srv, bucket, "k"); string(got) != "second" {
		t.Errorf("bucket holds %q", got)
	}
}

func TestConditionalCalls_NoConditionalWrites_RefusedAndBucketUnchanged(t *testing.T) {
	srv := garage.Start(t)
	bucket := srv.NewBucket(t)
	b := newBackend(t, srv, bucket, s3.ConditionalAuto)
	obj, err := b.Put(t.Context(), "lock", []byte("holder A"), backend.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Put(t.Context(), "lock", []byte("holder B"), backend.PutOptions{IfVersion: obj.Version})
	if !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("Put IfVersion = %v, want ErrUnsupported", err)
	}
	if err := b.Delete(t.Context(), "lock", backend.DeleteOptions{IfVersion: obj.Version}); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("Delete IfVersion = %v, want ErrUnsupported", err)
	}
	if err != nil && !strings.Contains(err.Error(), `"lock"`) {
		t.Errorf("error %q does not name the key", err)
	}
	if got, _ := oracleGet(t, srv, bucket, "lock"); string(got) != "holder A" {
		t.Errorf("the bucket holds %q after refused conditional calls, want %q", got, "holder A")
	}
}

func TestList_HidesProbeLeftoversOnly(t *testing.T) {
	srv := versitygw.Start(t)
	bucket := srv.NewBucket(t)
	b := newBackend(t, srv, bucket, s3.ConditionalAuto)
	for _, k := range []string{".cairn-state/.probe-0123", ".cairn-state/.probes", ".cairn-state/x"} {
		if _, err := srv.Minio(t).PutObject(t.Context(), bucket, k, strings.NewReader("x"), 1, minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var keys []string
	if err := b.List(t.Context(), "", func(o backend.Object) error { keys = append(keys, o.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	if want := []string{".cairn-state/.probes", ".cairn-state/x"}; !slices.Equal(keys, want) {
		t.Errorf("List = %q, want %q (only .probe-* hidden)", keys, want)
	}
}

func TestMissingBucket_FailsNamingBucket_NeverNotFound(t *testing.T) {
	eachServer(t, func(t *testing.T, srv oracleServer) {
		opts := srv.Options("no-such-bucket-here")
		opts.HTTPClient = httpClient(t)
		var log bytes.Buffer
		opts.Logger = slog.New(slog.NewTextHandler(&log, nil))
		nb, err := s3.NewBackend(t.Context(), opts)
		if err != nil {
			t.Fatalf("New (which sends no request) failed: %v", err)
		}
		defer nb.Close()
		_, err = nb.ResolveCapabilities(t.Context())
		if err == nil {
			t.Fatal("the auto probe on a missing bucket succeeded")
		}
		if !strings.Contains(err.Error(), "no-such-bucket-here") {
			t.Errorf("error %q does not name the bucket", err)
		}
		if strings.Contains(log.String(), "probe object") {
			t.Errorf("no probe object was written, yet the log speaks of one:\n%s", log.String())
		}
		b := newBackend(t, srv, "no-such-bucket-here", s3.ConditionalOff)
		_, _, err = b.Get(t.Context(), "k")
		if err == nil || errors.Is(err, backend.ErrNotFound) {
			t.Errorf("Get in a missing bucket = %v, want an error that is not ErrNotFound", err)
		}
		var apiErr smithy.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "NoSuchBucket" {
			t.Errorf("Get in a missing bucket: errors.As does not reach the SDK's NoSuchBucket: %v", err)
		}
	})
}

func TestGet_Absent_NotFoundNamingKeyAndReachingSDKError(t *testing.T) {
	srv := versitygw.Start(t)
	b := newBackend(t, srv, srv.NewBucket(t), s3.ConditionalAuto)
	_, _, err := b.Get(t.Context(), "dir/absent")
	if !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("Get absent = %v, want ErrNotFound", err)
	}
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "NoSuchKey" {
		t.Errorf("errors.As does not reach the SDK's NoSuchKey: %v", err)
	}
	if !strings.Contains(err.Error(), `"dir/absent"`) {
		t.Errorf("error %q does not name the key", err)
	}
}

func TestResolveCapabilities_LogsProbeOutcomeAndLockMode(t *testing.T) {
	srv := garage.Start(t)
	var buf bytes.Buffer
	opts := srv.Options(srv.NewBucket(t))
	opts.Logger = slog.New(slog.NewTextHandler(&buf, nil))
	opts.HTTPClient = httpClient(t)
	b, err := s3.NewBackend(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.ResolveCapabilities(t.Context()); err != nil {
		t.Fatal(err)
	}
	log := buf.String()
	for _, want := range []string{"conditional-write probe: lock mode claims: PutObject with If-None-Match: * on an existing object was carried out (header ignored)",
		"lock_mode=claims", "conditional_writes=false", opts.Bucket} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, srv.SecretKey) {
		t.Error("the log contains the secret key")
	}
}

func TestClose_ReleasesConnectionGoroutines_ThenRefusesUse(t *testing.T) {
	srv := versitygw.Start(t)
	opts := srv.Options(srv.NewBucket(t))
	before := goleak.IgnoreCurrent()
	b, err := s3.NewBackend(t.Context(), opts) // the backend's own HTTP client
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.ResolveCapabilities(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(t.Context(), "k", []byte("x"), backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, before)
	if _, err := b.Put(t.Context(), "k", []byte("y"), backend.PutOptions{}); err == nil || !strings.Contains(err.Error(), "after Close") {
		t.Errorf("Put after Close = %v, want a use-after-Close error", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

// The path a deployed instance takes: an s3:// URL plus credentials from the
// standard AWS chain (here the environment that Env gives a child process).
func TestURLAndEnv_OpenTheBucketThroughTheAWSChain(t *testing.T) {
	eachServer(t, func(t *testing.T, srv oracleServer) {
		bucket := srv.NewBucket(t)
		type urlServer interface {
			URL(bucket, root string) string
			Env() []string
		}
		us := srv.(urlServer)
		for _, kv := range us.Env() {
			k, v, _ := strings.Cut(kv, "=")
			t.Setenv(k, v)
		}
		opts, root, err := s3.ParseURL(us.URL(bucket, "apps/one"))
		if err != nil {
			t.Fatal(err)
		}
		if root != "apps/one" {
			t.Errorf("root = %q, want apps/one", root)
		}
		opts.ProbePrefix = root + "/.cairn-state/"
		opts.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
		b, err := s3.NewBackend(t.Context(), opts)
		if err != nil {
			t.Fatalf("s3.New from the URL with credentials from the environment: %v", err)
		}
		t.Cleanup(func() { b.Close() })
		if _, err := b.ResolveCapabilities(t.Context()); err != nil {
			t.Fatalf("probe with credentials from the environment: %v", err)
		}
		key := root + "/.cairn-state/x"
		if _, err := b.Put(t.Context(), key, []byte("via the chain"), backend.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		if got, _ := oracleGet(t, srv, bucket, key); string(got) != "via the chain" {
			t.Errorf("the bucket holds %q at %q", got, key)
		}
		if keys := oracleKeys(t, srv, bucket); !slices.Equal(keys, []string{key}) {
			t.Errorf("bucket keys = %q, want only %q (probe removed)", keys, key)
		}
	})
}

func TestNew_WrongRegionOrSecret_FailsWithAHint(t *testing.T) {
	srv := garage.Start(t)
	bucket := srv.NewBucket(t)
	for _, tc := range []struct {
		name string
		edit func(*s3.Options)
		hint string
	}{
		{"region", func(o *s3.Options) { o.Region = "us-east-1" }, "region="},
		{"secret", func(o *s3.Options) {
			o.Credentials = credentials.NewStaticCredentialsProvider(srv.AccessKey, strings.Repeat("0", 64), "")
		}, "AWS_SECRET_ACCESS_KEY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := srv.Options(bucket)
			opts.HTTPClient = httpClient(t)
			opts.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
			tc.edit(&opts)
			b, err := s3.NewBackend(t.Context(), opts)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			_, err = b.ResolveCapabilities(t.Context())
			if err == nil || !strings.Contains(err.Error(), tc.hint) {
				t.Errorf("ResolveCapabilities = %v, want an error with the hint %q", err, tc.hint)
			}
			if err != nil && strings.Contains(err.Error(), srv.SecretKey) {
				t.Error("the error contains the secret key")
			}
		})
	}
}
