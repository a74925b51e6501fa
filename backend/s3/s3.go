// Package s3 is a [backend.Backend] on S3-compatible storage, built on
// aws-sdk-go-v2. It is tested against real Garage and versitygw servers and
// written for AWS S3, MinIO and R2 as well.
//
// # Conditional writes
//
// Compare-and-swap maps to S3's conditional writes: If-None-Match: * for
// [backend.PutOptions.IfAbsent], If-Match: ETag for IfVersion on PutObject
// and DeleteObject. Not every server enforces them — Garage accepts the
// headers and ignores them — so with [ConditionalAuto] (the default)
// [New] probes the server once under the reserved prefix and uses
// conditions only if they were demonstrably enforced. Without them the
// backend reports no conditional writes and refuses conditional calls with
// [backend.ErrUnsupported]; it never performs them unconditionally.
//
// # Versions and clock
//
// An object's version is its ETag. For single-part uploads every server
// tested derives it from the content (MD5), so rewriting identical bytes
// keeps the version; callers that seal objects with fresh randomness (the
// store does) never write identical bytes twice. The storage clock is read
// from the HTTP Date header of a HeadBucket response (one second
// resolution, like Last-Modified).
//
// # Errors
//
// NoSuchKey maps to [backend.ErrNotFound]; 412 PreconditionFailed, and a
// conditional call on a missing key, map to [backend.ErrPreconditionFailed];
// 409 ConditionalRequestConflict is retried by the SDK retryer and, when
// retries run out, reported as [backend.ErrPreconditionFailed]; 501
// NotImplemented on a conditional call maps to [backend.ErrUnsupported]. A
// missing bucket is never ErrNotFound (that would read as "no such
// object"). SDK errors stay reachable with errors.As; context errors are
// returned unchanged. See docs/adr/0005-s3-error-mapping.md.
package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/cairnhq/state/backend"
)

// Backend stores objects in one S3 bucket. It is safe for concurrent use.
type Backend struct {
	client      *s3.Client
	transport   *http.Transport // ours to close; nil when the caller gave the HTTP client
	closed      atomic.Bool
	bucket      string
	probePrefix string
	conditional bool
	log         *slog.Logger
}

var (
	_ backend.Backend = (*Backend)(nil)
	_ io.Closer       = (*Backend)(nil)
)

// errClosed is returned by every operation after Close.
var errClosed = errors.New("s3 backend used after Close")

// New returns a backend on opts.Bucket. With opts.Conditional ==
// ConditionalAuto (or empty) it probes the server's conditional writes,
// which also checks that the bucket is reachable with the credentials; the
// probe's outcome is logged. It fails when the options are invalid or the
// probe cannot complete.
func New(ctx context.Context, opts Options) (*Backend, error) {
	if opts.Bucket == "" {
		return nil, errors.New("s3: Options.Bucket is empty")
	}
	mode, err := ParseConditionalMode(string(opts.Conditional))
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	probePrefix := opts.ProbePrefix
	if probePrefix == "" {
		probePrefix = DefaultProbePrefix
	}
	if !strings.HasSuffix(probePrefix, "/") {
		probePrefix += "/"
	}
	if err := backend.ValidatePrefix(probePrefix); err != nil {
		return nil, fmt.Errorf("s3: probe prefix: %w", err)
	}

	ownClient := opts.HTTPClient == nil
	cfg, err := awsConfig(ctx, opts)
	if err != nil {
		return nil, err
	}
	var transport *http.Transport
	if ownClient {
		// The SDK's transport, as the configuration left it (with the
		// AWS_CA_BUNDLE roots, for one), in a client we can close: Close
		// must release the idle connections (and their goroutines).
		bc, ok := cfg.HTTPClient.(*awshttp.BuildableClient)
		if !ok {
			bc = awshttp.NewBuildableClient()
		}
		transport = bc.GetTransport()
		cfg.HTTPClient = &http.Client{
			Transport: transport,
			// S3 redirects (wrong region) are answers to report, not
			// to follow; the SDK's own client does the same.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if opts.Endpoint != "" {
			o.BaseEndpoint = aws.String(opts.Endpoint)
		}
		o.UsePathStyle = opts.PathStyle
		// Self-hosted servers vary in their support of the SDK's default
		// CRC trailers; send and check checksums only where S3 requires
		// them. Payloads are still SHA-256 signed (SigV4).
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		// AWS answers 409 ConditionalRequestConflict when two conditional
		// writes race; re-sending re-evaluates the condition, so it is
		// safe to retry (ADR 0005).
		o.Retryer = retry.AddWithErrorCodes(retry.NewStandard(), "ConditionalRequestConflict")
	})
	b := &Backend{client: client, transport: transport, bucket: opts.Bucket, probePrefix: probePrefix, log: log}

	attrs := []any{slog.String("bucket", opts.Bucket), slog.String("endpoint", endpointForLog(opts.Endpoint)), slog.String("mode", string(mode))}
	switch mode {
	case ConditionalOn:
		b.conditional = true
		log.InfoContext(ctx, "s3 backend: conditional writes forced on", attrs...)
	case ConditionalOff:
		log.InfoContext(ctx, "s3 backend: conditional writes forced off", attrs...)
	case ConditionalAuto:
		res, err := b.Probe(ctx)
		if err != nil {
			b.Close()
			return nil, err
		}
		b.conditional = res.Supported
		log.InfoContext(ctx, "s3 backend: conditional-write probe", append(attrs,
			slog.Bool("conditional_writes", res.Supported),
			slog.Bool("put_conditions", res.PutConditions),
			slog.Bool("delete_conditions", res.DeleteConditions),
			slog.String("evidence", res.Evidence))...)
	}
	return b, nil
}

func awsConfig(ctx context.Context, opts Options) (aws.Config, error) {
	if opts.Credentials != nil {
		// Explicit credentials: do not read the environment or shared
		// files at all, so the caller's configuration is the whole truth.
		cfg := aws.Config{Region: opts.Region, Credentials: opts.Credentials}
		if opts.HTTPClient != nil {
			cfg.HTTPClient = opts.HTTPClient
		}
		if cfg.Region == "" {
			cfg.Region = "us-east-1"
		}
		return cfg, nil
	}
	var lo []func(*config.LoadOptions) error
	if opts.Region != "" {
		lo = append(lo, config.WithRegion(opts.Region))
	}
	if opts.HTTPClient != nil {
		lo = append(lo, config.WithHTTPClient(opts.HTTPClient))
	}
	cfg, err := config.LoadDefaultConfig(ctx, lo...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("s3: loading the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	return cfg, nil
}

func endpointForLog(e string) string {
	if e == "" {
		return "aws"
	}
	return e
}

// Capabilities implements backend.Backend. ConditionalWrites is the probe's
// finding (ConditionalAuto) or the forced mode.
func (b *Backend) Capabilities() backend.Capabilities {
	return backend.Capabilities{ConditionalWrites: b.conditional}
}

// Close releases the backend's idle connections. The backend must not be
// used afterwards: every operation then fails. An HTTP client given in
// Options is the caller's and is left alone.
func (b *Backend) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	if b.transport != nil {
		b.transport.CloseIdleConnections()
	}
	return nil
}

func (b *Backend) usable(op, key string) error {
	if b.closed.Load() {
		return fmt.Errorf("s3: %s %q in bucket %q: %w", op, key, b.bucket, errClosed)
	}
	return nil
}

// Bucket returns the bucket's name.
func (b *Backend) Bucket() string { return b.bucket }

// Get implements backend.Backend.
func (b *Backend) Get(ctx context.Context, key string) (io.ReadCloser, backend.Object, error) {
	if err := backend.ValidateKey(key); err != nil {
		return nil, backend.Object{}, err
	}
	if err := b.usable("get", key); err != nil {
		return nil, backend.Object{}, err
	}
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &b.bucket, Key: &key})
	if err != nil {
		return nil, backend.Object{}, b.mapErr(ctx, "get", key, false, err)
	}
	return out.Body, backend.Object{
		Key:     key,
		Size:    aws.ToInt64(out.ContentLength),
		Version: aws.ToString(out.ETag),
		ModTime: aws.ToTime(out.LastModified),
	}, nil
}

// Put implements backend.Backend. The returned ModTime is the server's Date
// header of the PutObject response (S3 does not return Last-Modified on
// writes); it can differ from a later listing's by the second it took.
func (b *Backend) Put(ctx context.Context, key string, data []byte, opts backend.PutOptions) (backend.Object, error) {
	if err := backend.ValidateKey(key); err != nil {
		return backend.Object{}, err
	}
	if err := b.usable("put", key); err != nil {
		return backend.Object{}, err
	}
	in := &s3.PutObjectInput{
		Bucket:        &b.bucket,
		Key:           &key,
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
	}
	op := "put"
	switch {
	case opts.IfAbsent && opts.IfVersion != "":
		return backend.Object{}, fmt.Errorf("s3: put %q: IfAbsent and IfVersion both set: %w", key, backend.ErrUnsupported)
	case opts.IfAbsent:
		op = "put if absent"
		in.IfNoneMatch = aws.String("*")
	case opts.IfVersion != "":
		op = "put if version " + opts.IfVersion
		in.IfMatch = aws.String(opts.IfVersion)
	}
	if in.IfNoneMatch != nil || in.IfMatch != nil {
		if !b.conditional {
			return backend.Object{}, b.unsupported(op, key)
		}
	}
	out, err := b.client.PutObject(ctx, in)
	if err != nil {
		return backend.Object{}, b.mapErr(ctx, op, key, in.IfNoneMatch != nil || in.IfMatch != nil, err)
	}
	mod, _ := awsmiddleware.GetServerTime(out.ResultMetadata)
	return backend.Object{
		Key:     key,
		Size:    int64(len(data)),
		Version: aws.ToString(out.ETag),
		ModTime: mod,
	}, nil
}

// Delete implements backend.Backend. S3 answers success for a missing key,
// so an unconditional delete of a missing key returns nil; a conditional
// one fails with ErrPreconditionFailed (a HeadObject precedes the
// conditional DeleteObject to tell, as not every server does).
func (b *Backend) Delete(ctx context.Context, key string, opts backend.DeleteOptions) error {
	if err := backend.ValidateKey(key); err != nil {
		return err
	}
	if err := b.usable("delete", key); err != nil {
		return err
	}
	in := &s3.DeleteObjectInput{Bucket: &b.bucket, Key: &key}
	op := "delete"
	if opts.IfVersion != "" {
		op = "delete if version " + opts.IfVersion
		if !b.conditional {
			return b.unsupported(op, key)
		}
		in.IfMatch = aws.String(opts.IfVersion)
		// Some servers (versitygw) answer 204 to a conditional delete of
		// a missing key, which the contract reports as a failed
		// condition; look first. If the object vanishes between the two
		// requests the delete still reports success, which leaves the
		// caller with what it asked for: no object of that version.
		head, err := b.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b.bucket, Key: &key})
		if err != nil {
			return b.mapErr(ctx, op, key, true, err)
		}
		if aws.ToString(head.ETag) != opts.IfVersion {
			return fmt.Errorf("s3: %s %q in bucket %q: the object has version %s: %w",
				op, key, b.bucket, aws.ToString(head.ETag), backend.ErrPreconditionFailed)
		}
	}
	if _, err := b.client.DeleteObject(ctx, in); err != nil {
		return b.mapErr(ctx, op, key, in.IfMatch != nil, err)
	}
	return nil
}

// List implements backend.Backend. ListObjectsV2 returns keys in UTF-8
// byte order, which is Go's string order; pages are fetched as fn
// consumes them. Leftovers of an interrupted probe are hidden.
func (b *Backend) List(ctx context.Context, prefix string, fn func(backend.Object) error) error {
	if err := backend.ValidatePrefix(prefix); err != nil {
		return err
	}
	if err := b.usable("list prefix", prefix); err != nil {
		return err
	}
	in := &s3.ListObjectsV2Input{Bucket: &b.bucket}
	if prefix != "" {
		in.Prefix = &prefix
	}
	pages := s3.NewListObjectsV2Paginator(b.client, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return b.mapErr(ctx, "list prefix", prefix, false, err)
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			if b.isProbeKey(key) {
				continue
			}
			err := fn(backend.Object{
				Key:     key,
				Size:    aws.ToInt64(o.Size),
				Version: aws.ToString(o.ETag),
				ModTime: aws.ToTime(o.LastModified),
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// Now implements backend.Backend: the Date header of a HeadBucket
// response, which needs the same permission as List.
func (b *Backend) Now(ctx context.Context) (time.Time, error) {
	if err := b.usable("read the clock of bucket", ""); err != nil {
		return time.Time{}, err
	}
	out, err := b.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &b.bucket})
	if err != nil {
		return time.Time{}, b.mapErr(ctx, "read the clock of", "", false, err)
	}
	t, ok := awsmiddleware.GetServerTime(out.ResultMetadata)
	if !ok {
		return time.Time{}, fmt.Errorf("s3: bucket %q: the server's response has no Date header", b.bucket)
	}
	return t, nil
}

func (b *Backend) unsupported(op, key string) error {
	return fmt.Errorf("s3: %s %q in bucket %q: conditional writes are not enabled on this backend (probe found none, or conditional=off): %w",
		op, key, b.bucket, backend.ErrUnsupported)
}
