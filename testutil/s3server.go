package testutil

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/minio/minio-go/v7"
	miniocreds "github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/s3"
	"github.com/cairnhq/state/internal/driver"
)

// S3Server is a running S3-compatible server, as a test sees it. The
// garage and versitygw packages embed it in their Server types.
type S3Server struct {
	// Endpoint is the server's base URL, e.g. "http://127.0.0.1:39010".
	Endpoint string
	// Region is the region requests must be signed for.
	Region string
	// AccessKey and SecretKey are credentials allowed to create buckets
	// and to read and write in them.
	AccessKey, SecretKey string
	// Name names the server in messages ("garage", "versitygw").
	Name string
}

// Minio returns an independent S3 client (minio-go) on the server: the
// tests' oracle for what the bucket really holds, so that a bug in
// backend/s3 cannot hide behind itself.
func (s *S3Server) Minio(t testing.TB) *minio.Client {
	t.Helper()
	c, err := s.minio(transport(t))
	if err != nil {
		t.Fatalf("minio client for %s: %v", s.Name, err)
	}
	return c
}

// minio returns a minio-go client on the server with its credentials,
// path-style, over tr.
func (s *S3Server) minio(tr http.RoundTripper) (*minio.Client, error) {
	u, err := url.Parse(s.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("%s endpoint %q: %w", s.Name, s.Endpoint, err)
	}
	return minio.New(u.Host, &minio.Options{
		Transport:    tr,
		Creds:        miniocreds.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		Secure:       u.Scheme == "https",
		Region:       s.Region,
		BucketLookup: minio.BucketLookupPath,
	})
}

// Ready reports whether the server answers a request signed with this
// server's credentials (ListBuckets). A server that answers but does not
// know the credentials — another test's server that won the race for the
// port — is not ready.
func (s *S3Server) Ready(ctx context.Context) error {
	c, err := s.minio(&http.Transport{DisableKeepAlives: true})
	if err != nil {
		return err
	}
	_, err = c.ListBuckets(ctx)
	return err
}

// NewBucket creates a fresh, empty bucket with a random name and returns
// the name. The bucket lives as long as the server.
func (s *S3Server) NewBucket(t testing.TB) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "cairn-test-" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Minio(t).MakeBucket(ctx, name, minio.MakeBucketOptions{Region: s.Region}); err != nil {
		t.Fatalf("creating bucket %q on %s: %v", name, s.Name, err)
	}
	return name
}

// Options returns backend options for bucket on this server, with static
// credentials and conditional writes probed (ConditionalAuto).
func (s *S3Server) Options(bucket string) s3.Options {
	return s3.Options{
		Bucket:      bucket,
		Endpoint:    s.Endpoint,
		Region:      s.Region,
		PathStyle:   true,
		Conditional: s3.ConditionalAuto,
		Credentials: credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	}
}

// Backend returns an S3 backend on bucket, with conditional writes probed
// (conditional=auto, capabilities resolved) and its log in the test's
// output.
func (s *S3Server) Backend(t testing.TB, bucket string) backend.Backend {
	t.Helper()
	return openS3(t, s.Options(bucket))
}

// openS3 opens an S3 backend with opts for a test: its log goes to the
// test's output (unless opts.Logger is set), its HTTP client's idle
// connections close when the test ends (unless opts.HTTPClient is set),
// its capabilities are resolved (the conditional=auto probe has run), and
// it is closed when the test ends.
func openS3(t testing.TB, opts s3.Options) backend.Backend {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Transport: transport(t)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := s3.New(ctx, opts)
	if err != nil {
		t.Fatalf("s3 backend on bucket %q at %s: %v", opts.Bucket, opts.Endpoint, err)
	}
	t.Cleanup(func() { b.(io.Closer).Close() })
	if _, err := driver.ResolveCapabilities(ctx, b); err != nil {
		t.Fatalf("s3 backend on bucket %q at %s: resolving capabilities: %v", opts.Bucket, opts.Endpoint, err)
	}
	return b
}

// URL returns the s3:// backend URL of bucket on this server, with the
// root prefix root (may be empty) and conditional=auto. Credentials are
// not in the URL: pass Env to the process that opens it.
func (s *S3Server) URL(bucket, root string) string {
	u := url.URL{Scheme: "s3", Host: bucket}
	if root = strings.Trim(root, "/"); root != "" {
		u.Path = "/" + root
	}
	q := url.Values{}
	q.Set("endpoint", s.Endpoint)
	q.Set("region", s.Region)
	q.Set("path_style", "true")
	q.Set("conditional", "auto")
	u.RawQuery = q.Encode()
	return u.String()
}

// transport returns an HTTP transport whose idle connections are closed
// when the test ends, so that leak checkers (goleak) see no stray
// connection goroutines.
func transport(t testing.TB) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// Env returns the environment variables that give a child process this
// server's credentials through the standard AWS chain, isolated from the
// user's own AWS configuration files. Append them to os.Environ().
func (s *S3Server) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + s.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + s.SecretKey,
		"AWS_SESSION_TOKEN=",
		"AWS_PROFILE=",
		"AWS_REGION=" + s.Region,
		"AWS_DEFAULT_REGION=" + s.Region,
		"AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_EC2_METADATA_DISABLED=true",
	}
}
