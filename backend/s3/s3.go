// Package s3 is a [backend.Backend] on S3-compatible storage, built on
// aws-sdk-go-v2. It is tested against real Garage (one node and a
// three-node cluster) and versitygw servers and written for AWS S3, MinIO
// and R2 as well.
//
// # Conditional writes
//
// Compare-and-swap maps to S3's conditional writes: If-None-Match: * for
// [backend.PutOptions.IfAbsent], If-Match: ETag for IfVersion on PutObject
// and DeleteObject. Not every server enforces them — Garage accepts the
// headers and ignores them — so with [ConditionalAuto] (the default) the
// backend probes the server once under the reserved prefix, the first time
// its capabilities are resolved (the lock does, before it acquires;
// read-only use never does, and so never writes), and uses conditions
// only if they were demonstrably enforced. Until then, and
// when they were not, the backend reports no conditional writes and
// refuses conditional calls with [backend.ErrUnsupported]; it never
// performs them unconditionally. [New] itself sends no request.
//
// # Endpoints, timeouts and retries
//
// [Options.Endpoint] may list several base URLs (the nodes of one Garage
// cluster, say): requests fail over to the next on a connection error, a
// timeout or a 5xx, and stay on the last one that answered (ADR 0015).
// Every request runs under connect, response and per-attempt timeouts and
// is sent at most [Options.MaxAttempts] times, only when its error can
// pass; permanent answers (access denied, no such bucket, a wrong region)
// are returned at once, and no attempt starts once the context is done
// (ADR 0016). Failovers are logged.
//
// # Versions and clock
//
// An object's version is its ETag. For single-part uploads every server
// tested derives it from the content (MD5), so rewriting identical bytes
// keeps the version; callers that seal objects with fresh randomness (the
// store does) never write identical bytes twice. The storage clock is the
// HTTP Date header of a response (one second resolution, like
// Last-Modified): Now sends a HeadBucket, and every
// [backend.Object] from Get, Put and List carries the Date of the response
// that produced it in its Now field — the clock of the endpoint that
// answered.
//
// # Errors
//
// NoSuchKey maps to [backend.ErrNotFound]; 412 PreconditionFailed, and a
// conditional call on a missing key, map to [backend.ErrPreconditionFailed];
// 409 ConditionalRequestConflict is retried and, when retries run out,
// reported as [backend.ErrPreconditionFailed]; 501 NotImplemented on a
// conditional call maps to [backend.ErrUnsupported]; 403 (access denied,
// an unknown key, a wrong secret) maps to [backend.ErrPermission]. A
// missing bucket is never ErrNotFound (that would read as "no such
// object"). An operation that got no answer names the endpoint and the
// timeout or network error. SDK errors stay reachable with errors.As;
// context errors are returned unchanged. See docs/adr/0005.
//
// # Server-side copies
//
// The backend is a [backend.Copier] (CopyObject: the bytes never pass
// through this process). IfSourceVersion is sent as
// x-amz-copy-source-if-match and IfAbsent as If-None-Match: * on the copy;
// servers differ here (versitygw v1.8.0 and Garage 2.5.0 enforce the first
// and ignore the second, docs/adr/0041), so under ConditionalAuto each is
// used only once a copy probe has seen the server enforce it, and a copy
// with a condition not seen enforced fails with [backend.ErrUnsupported],
// copying nothing. ConditionalOn trusts the server with both,
// ConditionalOff refuses both.
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
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/logging"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/driver"
)

// s3Backend stores objects in one S3 bucket.
type s3Backend struct {
	client      *s3.Client
	transport   *http.Transport // ours to close; nil when the caller gave the HTTP client
	closed      atomic.Bool
	bucket      string
	probePrefix string
	mode        ConditionalMode
	eps         *endpoints
	retry       retryPolicy
	connect     time.Duration // Options.ConnectTimeout, for Diagnose's own connections
	caps        capabilities
	copyCaps    copyCapabilities
	log         *slog.Logger
}

var (
	_ backend.Backend = (*s3Backend)(nil)
	_ driver.Resolver = (*s3Backend)(nil)
	_ driver.Adopter  = (*s3Backend)(nil)
	_ io.Closer       = (*s3Backend)(nil)
)

// errClosed is returned by every operation after Close.
var errClosed = errors.New("s3 backend used after Close")

// New returns a backend on opts.Bucket, safe for concurrent use. It checks
// the options and sends no request: a wrong endpoint, region, bucket or
// credentials show at the first operation (or when the lock resolves the
// capabilities before it acquires). With opts.Conditional ==
// ConditionalAuto (or empty) the capabilities are unresolved until then.
// The backend is an io.Closer: Close releases its idle connections (an
// HTTP client given in Options is the caller's and is left alone), and
// every operation after it fails.
func New(ctx context.Context, opts Options) (backend.Backend, error) {
	if opts.Bucket == "" {
		return nil, errors.New("s3: Options.Bucket is empty")
	}
	mode, err := parseConditionalMode(string(opts.Conditional))
	if err != nil {
		return nil, err
	}
	opts, err = opts.withDefaults()
	if err != nil {
		return nil, err
	}
	urls, err := ParseEndpoints(opts.Endpoint)
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	probePrefix := opts.ProbePrefix
	if probePrefix == "" {
		probePrefix = defaultProbePrefix
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
	cfg.HTTPClient = &timedClient{
		next:           cfg.HTTPClient,
		connect:        opts.ConnectTimeout,
		response:       opts.ResponseTimeout,
		attemptTimeout: opts.AttemptTimeout,
	}
	eps := &endpoints{urls: urls, log: log}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if len(urls) > 0 {
			o.BaseEndpoint = aws.String(urls[0])
		}
		o.UsePathStyle = opts.PathStyle
		// Self-hosted servers vary in their support of the SDK's default
		// CRC trailers; send and check checksums only where S3 requires
		// them. Payloads are still SHA-256 signed (SigV4).
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		// Retries and failover are the backend's own (call), so that
		// they can move between endpoints and stop at permanent errors.
		o.Retryer = aws.NopRetryer{}
	})
	b := &s3Backend{
		client: client, transport: transport, bucket: opts.Bucket, probePrefix: probePrefix,
		mode: mode, eps: eps, log: log, connect: opts.ConnectTimeout,
		retry: retryPolicy{maxAttempts: opts.MaxAttempts, maxBackoff: opts.MaxBackoff},
	}
	attrs := []any{slog.String("bucket", opts.Bucket), slog.String("endpoints", strings.Join(b.endpointNames(), ",")), slog.String("mode", string(mode))}
	switch mode {
	case ConditionalOn:
		b.caps.set(true, "conditional=on in the URL: not probed, the operator vouches for the server")
		log.InfoContext(ctx, "s3 backend: conditional writes forced on; lock mode compare-and-swap (conditional=on: the operator vouches for the server)", attrs...)
	case ConditionalOff:
		b.caps.set(false, "conditional=off in the URL: not probed")
		log.InfoContext(ctx, "s3 backend: conditional writes forced off; lock mode claims (conditional=off)", attrs...)
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
	// The SDK's own messages (the IMDSv1 fallback, retries) go to the
	// backend's logger at debug level, not to stderr.
	lo := []func(*config.LoadOptions) error{config.WithLogger(sdkLogger{opts.Logger})}
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

// endpointNames returns the base URLs the backend sends its requests to, in
// order of preference; "aws" when the SDK resolves AWS's.
func (b *s3Backend) endpointNames() []string {
	if len(b.eps.urls) == 0 {
		return []string{"aws"}
	}
	return append([]string(nil), b.eps.urls...)
}

// CurrentEndpoint returns the endpoint requests go to now: the first one,
// or the one the last failover moved to.
func (b *s3Backend) CurrentEndpoint() string {
	i, _ := b.eps.get()
	return b.eps.name(i)
}

// Capabilities implements backend.Backend. ConditionalWrites is the probe's
// finding or the capabilities adopted from a store's record
// (ConditionalAuto, once resolved; false before) or the forced mode;
// Evidence says which. CopySourceConditions is the copy probe's finding
// or the adopted record the same way (true under ConditionalOn, false
// under ConditionalOff).
func (b *s3Backend) Capabilities() backend.Capabilities {
	return backend.Capabilities{ConditionalWrites: b.caps.conditional(), CopySourceConditions: b.copySourceConditions(), Evidence: b.caps.why()}
}

// Close releases the backend's idle connections. The backend must not be
// used afterwards: every operation then fails. An HTTP client given in
// Options is the caller's and is left alone.
func (b *s3Backend) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	if b.transport != nil {
		b.transport.CloseIdleConnections()
	}
	return nil
}

func (b *s3Backend) usable(op, key string) error {
	if b.closed.Load() {
		return fmt.Errorf("s3: %s %q in bucket %q: %w", op, key, b.bucket, errClosed)
	}
	return nil
}

// Get implements backend.Backend. The object's Now is the Date of the
// GetObject response.
func (b *s3Backend) Get(ctx context.Context, key string) (io.ReadCloser, backend.Object, error) {
	if err := backend.ValidateKey(key); err != nil {
		return nil, backend.Object{}, err
	}
	if err := b.usable("get", key); err != nil {
		return nil, backend.Object{}, err
	}
	in := &s3.GetObjectInput{Bucket: &b.bucket, Key: &key}
	var out *s3.GetObjectOutput
	err := b.call(ctx, "get", key, false, func(ctx context.Context, ep func(*s3.Options)) (err error) {
		out, err = b.client.GetObject(ctx, in, ep)
		return err
	})
	if err != nil {
		return nil, backend.Object{}, err
	}
	now, _ := awsmiddleware.GetServerTime(out.ResultMetadata)
	return out.Body, backend.Object{
		Key:     key,
		Size:    aws.ToInt64(out.ContentLength),
		Version: aws.ToString(out.ETag),
		ModTime: aws.ToTime(out.LastModified),
		Now:     now,
	}, nil
}

// Put implements backend.Backend. The returned ModTime and Now are the
// server's Date header of the PutObject response (S3 does not return
// Last-Modified on writes); ModTime can differ from a later listing's by
// the second it took. It is PutBody of data.
func (b *s3Backend) Put(ctx context.Context, key string, data []byte, opts backend.PutOptions) (backend.Object, error) {
	return b.PutBody(ctx, key, bytes.NewReader(data), int64(len(data)), opts)
}

// PutBody implements driver.BodyPutter (Put is PutBody of its bytes):
// one PutObject with the body's length as its Content-Length, every
// attempt — a retry, a failover — sending the body from its start through
// a reader of its own, so that the SDK can read it to sign its SHA-256
// and seek back. A body that fails or ends early ends the write at once,
// unretried.
func (b *s3Backend) PutBody(ctx context.Context, key string, body io.ReaderAt, size int64, opts backend.PutOptions) (backend.Object, error) {
	if err := backend.ValidateKey(key); err != nil {
		return backend.Object{}, err
	}
	if err := b.usable("put", key); err != nil {
		return backend.Object{}, err
	}
	in := &s3.PutObjectInput{
		Bucket:        &b.bucket,
		Key:           &key,
		ContentLength: aws.Int64(size),
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
	conditional := in.IfNoneMatch != nil || in.IfMatch != nil
	if conditional {
		if err := b.conditionalAllowed(op, key); err != nil {
			return backend.Object{}, err
		}
	}
	var out *s3.PutObjectOutput
	err := b.call(ctx, op, key, conditional, func(ctx context.Context, ep func(*s3.Options)) (err error) {
		r := newAttemptBody(body, size) // each attempt sends the whole body
		in.Body = r
		out, err = b.client.PutObject(ctx, in, ep)
		if berr := r.failed(); berr != nil && err != nil {
			return berr // not the server's answer: no retry can help
		}
		return err
	})
	if err != nil {
		return backend.Object{}, err
	}
	now, _ := awsmiddleware.GetServerTime(out.ResultMetadata)
	return backend.Object{
		Key:     key,
		Size:    size,
		Version: aws.ToString(out.ETag),
		ModTime: now,
		Now:     now,
	}, nil
}

// Delete implements backend.Backend. S3 answers success for a missing key,
// so an unconditional delete of a missing key returns nil; a conditional
// one fails with ErrPreconditionFailed (a HeadObject precedes the
// conditional DeleteObject to tell, as not every server does), unless
// opts.AbsentOK says a missing key counts as deleted.
func (b *s3Backend) Delete(ctx context.Context, key string, opts backend.DeleteOptions) error {
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
		if err := b.conditionalAllowed(op, key); err != nil {
			return err
		}
		in.IfMatch = aws.String(opts.IfVersion)
	}
	if opts.IfVersion != "" && !opts.AbsentOK {
		// Some servers (versitygw) answer 204 to a conditional delete of
		// a missing key, which the contract reports as a failed
		// condition; look first. If the object vanishes between the two
		// requests the delete still reports success, which leaves the
		// caller with what it asked for: no object of that version. A
		// caller for whom a missing key is deleted (AbsentOK) is spared
		// the look.
		var head *s3.HeadObjectOutput
		err := b.call(ctx, op, key, true, func(ctx context.Context, ep func(*s3.Options)) (err error) {
			head, err = b.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b.bucket, Key: &key}, ep)
			return err
		})
		if err != nil {
			return err
		}
		if aws.ToString(head.ETag) != opts.IfVersion {
			return fmt.Errorf("s3: %s %q in bucket %q: the object has version %s: %w",
				op, key, b.bucket, aws.ToString(head.ETag), backend.ErrPreconditionFailed)
		}
	}
	err := b.call(ctx, op, key, in.IfMatch != nil && !opts.AbsentOK, func(ctx context.Context, ep func(*s3.Options)) error {
		_, err := b.client.DeleteObject(ctx, in, ep)
		return err
	})
	if opts.AbsentOK && errors.Is(err, backend.ErrNotFound) {
		return nil // a server that says so: gone is what was asked
	}
	return err
}

// List implements backend.Backend. ListObjectsV2 returns keys in UTF-8
// byte order, which is Go's string order; pages are fetched as fn
// consumes them, each with the backend's retries, possibly from another
// endpoint than the page before (continuation tokens are the server's to
// make portable; Garage's encode the key to resume after). Every object's
// Now is the Date of its page's response. Leftovers of an interrupted
// probe are hidden.
func (b *s3Backend) List(ctx context.Context, prefix string, fn func(backend.Object) error) error {
	if err := backend.ValidatePrefix(prefix); err != nil {
		return err
	}
	if err := b.usable("list prefix", prefix); err != nil {
		return err
	}
	in := &s3.ListObjectsV2Input{Bucket: &b.bucket}
	op := "list"
	if prefix != "" {
		in.Prefix = &prefix
		op = "list prefix"
	}
	for {
		var page *s3.ListObjectsV2Output
		err := b.call(ctx, op, prefix, false, func(ctx context.Context, ep func(*s3.Options)) (err error) {
			page, err = b.client.ListObjectsV2(ctx, in, ep)
			return err
		})
		if err != nil {
			return err
		}
		now, _ := awsmiddleware.GetServerTime(page.ResultMetadata)
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			if b.isProbeKey(key) || isServerTempName(key) {
				continue
			}
			err := fn(backend.Object{
				Key:     key,
				Size:    aws.ToInt64(o.Size),
				Version: aws.ToString(o.ETag),
				ModTime: aws.ToTime(o.LastModified),
				Now:     now,
			})
			if err != nil {
				return err
			}
		}
		if !aws.ToBool(page.IsTruncated) || aws.ToString(page.NextContinuationToken) == "" {
			return nil
		}
		in.ContinuationToken = page.NextContinuationToken
	}
}

// Now implements backend.Backend: the Date header of a HeadBucket
// response, which needs the same permission as List, from the endpoint
// that answered it.
func (b *s3Backend) Now(ctx context.Context) (time.Time, error) {
	if err := b.usable("read the clock of bucket", ""); err != nil {
		return time.Time{}, err
	}
	var out *s3.HeadBucketOutput
	err := b.call(ctx, "read the clock of", "", false, func(ctx context.Context, ep func(*s3.Options)) (err error) {
		out, err = b.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &b.bucket}, ep)
		return err
	})
	if err != nil {
		return time.Time{}, err
	}
	t, ok := awsmiddleware.GetServerTime(out.ResultMetadata)
	if !ok {
		return time.Time{}, fmt.Errorf("s3: bucket %q: the server's response has no Date header", b.bucket)
	}
	return t, nil
}

// conditionalAllowed refuses a conditional call unless conditional writes
// are known to be enforced.
func (b *s3Backend) conditionalAllowed(op, key string) error {
	switch b.caps.state() {
	case capsConditional:
		return nil
	case capsUnresolved:
		return fmt.Errorf("s3: %s %q in bucket %q: the backend's capabilities were not resolved (conditional=auto probes the server at driver.ResolveCapabilities, which was not called or did not succeed): %w",
			op, key, b.bucket, backend.ErrUnsupported)
	}
	return fmt.Errorf("s3: %s %q in bucket %q: conditional writes are not enabled on this backend (probe found none, or conditional=off): %w",
		op, key, b.bucket, backend.ErrUnsupported)
}

// sdkLogger passes the AWS SDK's log messages to a slog.Logger (nil:
// slog.Default()) at debug level: they concern the SDK's own steps, and
// the backend reports what fails in its errors.
type sdkLogger struct{ l *slog.Logger }

func (s sdkLogger) Logf(classification logging.Classification, format string, v ...any) {
	l := s.l
	if l == nil {
		l = slog.Default()
	}
	l.Debug("s3 backend: aws sdk: "+fmt.Sprintf(format, v...), "classification", string(classification))
}
