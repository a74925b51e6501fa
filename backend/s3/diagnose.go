package s3

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/s3diag"
)

// Diagnose checks, for an operator's tool, each part of the way to the
// store and tells apart what is wrong. In order, stopping where the next
// step could learn nothing:
//
//  1. the credentials are resolved from the backend's provider, so that
//     "none found" is told from "refused";
//  2. each endpoint, in parallel, is connected to (TCP, within the connect
//     timeout) and, with credentials, sent one signed listing of at most
//     one key under the probe prefix;
//  3. the first endpoint that answered below 500 decides the refusal (Diagnosis.Refusal);
//  4. when its listing succeeded, Probe runs, whatever the
//     backend's ConditionalMode (it writes and removes one throwaway
//     object under the probe prefix), with the backend's retries;
//  5. unless the storage stopped answering during the probe, each usable
//     endpoint's clock is read.
//
// The requests of steps 2 and 5 are sent once, to their endpoint only —
// no retry, no failover, the backend's current endpoint left as it was —
// each bounded by the backend's connect and response timeouts and by ctx,
// which bounds the whole diagnosis. Diagnose changes neither the
// backend's capabilities nor its state; its findings are in the result,
// failures included.
func (b *s3Backend) Diagnose(ctx context.Context) s3diag.Diagnosis {
	d := s3diag.Diagnosis{Region: b.client.Options().Region}
	d.CredentialsSource, d.CredentialsErr = b.credentials(ctx)
	eps := b.endpointNames()
	d.Endpoints = make([]s3diag.EndpointCheck, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Go(func() { d.Endpoints[i] = b.checkEndpoint(ctx, i, ep, d.CredentialsErr == nil) })
	}
	wg.Wait()
	first := slices.IndexFunc(d.Endpoints, s3diag.EndpointCheck.OK)
	if d.CredentialsErr != nil || first < 0 {
		return d
	}
	d.Answer = &d.Endpoints[first]
	if d.Refusal = refusalOf(d.Answer); d.Refusal != "" {
		return d
	}
	d.Probe = b.probeCheck(ctx)
	if d.Probe.Unanswered {
		return d
	}
	var usable []int
	for i, e := range d.Endpoints {
		if e.OK() {
			usable = append(usable, i)
		}
	}
	d.Clocks = make([]s3diag.ClockReading, len(usable))
	for n, i := range usable {
		wg.Go(func() { d.Clocks[n] = b.readClock(ctx, i, eps[i]) })
	}
	wg.Wait()
	return d
}

// credentials resolves the backend's credentials and names their source.
func (b *s3Backend) credentials(ctx context.Context) (string, error) {
	p := b.client.Options().Credentials
	if p == nil {
		return "", errors.New("no credentials in the AWS configuration")
	}
	c, err := p.Retrieve(ctx)
	if err != nil {
		return "", err
	}
	return c.Source, nil
}

// checkEndpoint connects to endpoint i and, when there are credentials,
// sends it one signed listing under the probe prefix.
func (b *s3Backend) checkEndpoint(ctx context.Context, i int, ep string, creds bool) s3diag.EndpointCheck {
	r := s3diag.EndpointCheck{Endpoint: ep}
	if len(b.eps.urls) > 0 {
		if r.Connect, r.ConnectErr = b.dial(ctx, ep); r.ConnectErr != nil {
			return r
		}
	}
	if !creds {
		return r
	}
	r.Sent = true
	if r.Err = b.usable("list prefix", b.probePrefix); r.Err != nil {
		return r
	}
	in := &s3.ListObjectsV2Input{Bucket: &b.bucket, Prefix: &b.probePrefix, MaxKeys: aws.Int32(1)}
	start := time.Now()
	err := b.once(ctx, i, "list prefix", b.probePrefix, func(ctx context.Context, endpoint func(*s3.Options)) error {
		_, err := b.client.ListObjectsV2(ctx, in, endpoint)
		return err
	})
	r.Took = time.Since(start)
	if err == nil {
		r.Status = 200
		return r
	}
	r.Err = err
	// An HTTP answer, whatever its status; a request that was not sent,
	// or whose answer did not come, has no response (the SDK still wraps
	// it in a ResponseError).
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.Response != nil && re.HTTPStatusCode() != 0 {
		r.Status = re.HTTPStatusCode()
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		r.Code, r.Message = api.ErrorCode(), api.ErrorMessage()
	}
	return r
}

// dial opens a TCP connection to endpoint ep within the connect timeout
// and closes it again.
func (b *s3Backend) dial(ctx context.Context, ep string) (time.Duration, error) {
	u, err := url.Parse(ep)
	if err != nil {
		return 0, err
	}
	host := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(u.Hostname(), port)
	}
	dctx, cancel := context.WithTimeout(ctx, b.connect)
	defer cancel()
	start := time.Now()
	c, err := (&net.Dialer{}).DialContext(dctx, "tcp", host)
	took := time.Since(start)
	if err != nil {
		// The dialer gives up at the deadline on its own timer, which may
		// fire before dctx's: either is the connect timeout, unless the
		// caller's context ended.
		var ne net.Error
		if (errors.As(err, &ne) && ne.Timeout() || errors.Is(dctx.Err(), context.DeadlineExceeded)) && ctx.Err() == nil {
			err = &timeoutError{host: host, step: "did not accept a connection within", limit: b.connect, name: "connect timeout"}
		}
		return took, err
	}
	return took, c.Close()
}

// once sends one attempt of an operation to endpoint i, without retry or
// failover and without moving the backend's current endpoint; its error
// is reported as call reports a last attempt's.
func (b *s3Backend) once(ctx context.Context, i int, op, key string, send func(ctx context.Context, endpoint func(*s3.Options)) error) error {
	if err := send(ctx, b.eps.at(i)); err != nil {
		return b.settle(ctx, op, key, false, i, 1, err)
	}
	return nil
}

// S3 error codes, by what they say is wrong.
var (
	regionCodes = map[string]bool{
		"AuthorizationHeaderMalformed": true, "PermanentRedirect": true, "AuthorizationQueryParametersError": true,
		"IllegalLocationConstraintException": true, "InvalidRegion": true,
	}
	credentialCodes = map[string]bool{
		"InvalidAccessKeyId": true, "SignatureDoesNotMatch": true, "AccessDenied": true,
		"XAdminUserNotFound": true, // versitygw: an unknown access key
		"InvalidToken":       true, "ExpiredToken": true, "InvalidClientTokenId": true, "TokenRefreshRequired": true,
	}
)

// refusalOf tells what an answer to the signed listing refused.
func refusalOf(r *s3diag.EndpointCheck) string {
	switch {
	case r.Err == nil:
		return ""
	case regionCodes[r.Code]:
		return "region"
	case r.Code == "RequestTimeTooSkewed":
		return "time"
	case r.Code == "InvalidAccessKeyId", r.Code == "XAdminUserNotFound":
		return "access-key"
	case r.Code == "SignatureDoesNotMatch":
		return "secret"
	case r.Code == "AccessDenied", r.Code == "" && r.Status == 403:
		return "denied"
	case credentialCodes[r.Code], r.Status == 403:
		return "credentials"
	case r.Code == "NoSuchBucket":
		return "bucket"
	}
	return "listing"
}

// probeCheck runs the probe and names the lock mode the configuration
// implies.
func (b *s3Backend) probeCheck(ctx context.Context) *s3diag.ProbeCheck {
	res, err := b.Probe(ctx)
	p := &s3diag.ProbeCheck{Result: res, Err: err}
	var timeout interface{ Timeout() bool }
	switch {
	case err == nil:
		p.LockMode, p.LockModeWhy = res.LockMode()
		if !res.Supported {
			p.LockModeWhy = "the server does not enforce the conditions"
		}
	case errors.Is(err, backend.ErrPermission):
	case errors.As(err, &timeout) && timeout.Timeout(), ctx.Err() != nil:
		p.Unanswered = true
	}
	switch b.mode {
	case ConditionalOn:
		p.LockMode, p.LockModeWhy = "compare-and-swap", "conditional=on in the URL"
	case ConditionalOff:
		p.LockMode, p.LockModeWhy = "claims", "conditional=off in the URL"
	}
	return p
}

// readClock reads endpoint i's clock: the Date of one HeadBucket, against
// this machine's clock at the request's midpoint.
func (b *s3Backend) readClock(ctx context.Context, i int, ep string) s3diag.ClockReading {
	r := s3diag.ClockReading{Endpoint: ep}
	if r.Err = b.usable("read the clock of bucket", ""); r.Err != nil {
		return r
	}
	var out *s3.HeadBucketOutput
	t0 := time.Now()
	err := b.once(ctx, i, "read the clock of", "", func(ctx context.Context, endpoint func(*s3.Options)) (err error) {
		out, err = b.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &b.bucket}, endpoint)
		return err
	})
	t1 := time.Now()
	if err != nil {
		r.Err = err
		return r
	}
	at, ok := awsmiddleware.GetServerTime(out.ResultMetadata)
	if !ok {
		r.Err = fmt.Errorf("s3: bucket %q: the server's response has no Date header", b.bucket)
		return r
	}
	r.Storage, r.Local = at, t0.Add(t1.Sub(t0)/2)
	r.Offset = at.Add(500 * time.Millisecond).Sub(r.Local)
	r.Uncertainty = 500*time.Millisecond + t1.Sub(t0)/2
	return r
}

// The probes and the diagnosis are for cairn-state's own packages, which
// find them by asserting s3diag.Backend (docs/adr/0062).
var _ s3diag.Backend = (*s3Backend)(nil)
