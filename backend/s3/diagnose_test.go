package s3_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/cairnhq/state/backend/s3"
	"github.com/cairnhq/state/internal/s3diag"
	"github.com/cairnhq/state/internal/testserver"
	"github.com/cairnhq/state/testutil/garage"
)

// diagnose opens a backend on opts as an operator's tool does (its
// capabilities unresolved) and diagnoses it under a one-minute deadline.
func diagnose(t *testing.T, opts s3.Options) (*s3.Backend, s3diag.Diagnosis) {
	t.Helper()
	opts.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	opts.HTTPClient = httpClient(t)
	b, err := s3.NewBackend(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	d := b.Diagnose(ctx)
	t.Logf("diagnosis: %+v", d)
	return b, d
}

// refusedPort returns the base URL of a port nothing listens on.
func refusedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "http://" + l.Addr().String()
}

// wantStopped fails the test unless the diagnosis stopped before the
// probe.
func wantStopped(t *testing.T, d s3diag.Diagnosis) {
	t.Helper()
	if d.Probe != nil || d.Clocks != nil {
		t.Errorf("the diagnosis went on after a failure: probe %+v, clocks %+v", d.Probe, d.Clocks)
	}
}

func TestDiagnose_HealthyStore_EveryStepFindsItsPart(t *testing.T) {
	eachServer(t, func(t *testing.T, srv oracleServer) {
		bucket := srv.NewBucket(t)
		opts := srv.Options(bucket)
		opts.ProbePrefix = "apps/one/.cairn-state/"
		b, d := diagnose(t, opts)

		if d.CredentialsErr != nil || d.CredentialsSource != "StaticCredentials" || d.Region != opts.Region {
			t.Errorf("credentials %q, %v; region %q", d.CredentialsSource, d.CredentialsErr, d.Region)
		}
		if len(d.Endpoints) != 1 || d.Answer != &d.Endpoints[0] {
			t.Fatalf("endpoints %+v, answer %p", d.Endpoints, d.Answer)
		}
		e := d.Endpoints[0]
		if e.Endpoint != opts.Endpoint || !e.OK() || !e.Sent || e.Status != 200 || e.Err != nil || e.Connect <= 0 || e.Took <= 0 {
			t.Errorf("endpoint %+v", e)
		}
		if d.Refusal != "" {
			t.Errorf("refusal %q of a healthy store", d.Refusal)
		}
		_, onGarage := srv.(*garage.Server)
		cas := !onGarage // versitygw enforces the conditions, Garage does not
		mode := map[bool]string{true: "compare-and-swap", false: "claims"}[cas]
		if p := d.Probe; p == nil || p.Err != nil || p.Result.Supported != cas || p.LockMode != mode || p.LockModeWhy == "" || p.Unanswered {
			t.Fatalf("probe %+v, want lock mode %s", p, mode)
		}
		if len(d.Clocks) != 1 {
			t.Fatalf("clocks %+v", d.Clocks)
		}
		c := d.Clocks[0]
		if c.Err != nil || c.Endpoint != opts.Endpoint || c.Storage.IsZero() || c.Storage.Nanosecond() != 0 ||
			c.Offset.Abs() > 2*time.Second || c.Uncertainty < 500*time.Millisecond {
			t.Errorf("clock %+v", c)
		}
		// Diagnose changes nothing: the probe's object is gone, the
		// capabilities are still to be resolved.
		if keys := oracleKeys(t, srv, bucket); len(keys) != 0 {
			t.Errorf("the diagnosis left %v", keys)
		}
		if caps := b.Capabilities(); caps.ConditionalWrites || caps.Evidence != "" {
			t.Errorf("the diagnosis resolved the capabilities: %+v", caps)
		}
	})
}

func TestDiagnose_WrongRegion_RefusalRegion_Stops(t *testing.T) {
	eachServer(t, func(t *testing.T, srv oracleServer) {
		opts := srv.Options(srv.NewBucket(t))
		opts.Region = "eu-west-9"
		_, d := diagnose(t, opts)
		if d.Refusal != "region" || d.Answer == nil || d.Answer.Status != 400 || d.Answer.Code != "AuthorizationHeaderMalformed" {
			t.Errorf("refusal %q, answer %+v", d.Refusal, d.Answer)
		}
		if d.Region != "eu-west-9" {
			t.Errorf("region in force %q", d.Region)
		}
		wantStopped(t, d)
	})
}

func TestDiagnose_WrongCredentials_ToldApartByTheServersCode(t *testing.T) {
	eachServer(t, func(t *testing.T, srv oracleServer) {
		opts := srv.Options(srv.NewBucket(t))
		_, onGarage := srv.(*garage.Server)
		creds, err := opts.Credentials.Retrieve(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		key, secret := creds.AccessKeyID, creds.SecretAccessKey
		for _, c := range []struct {
			name              string
			access, secretKey string
			want              string
		}{
			// Garage answers 403 AccessDenied to both.
			{"wrong secret", key, strings.Repeat("0", 64), map[bool]string{false: "secret", true: "denied"}[onGarage]},
			{"unknown access key", "GK0123456789abcdef01234567", secret, map[bool]string{false: "access-key", true: "denied"}[onGarage]},
		} {
			t.Run(c.name, func(t *testing.T) {
				o := opts
				o.Credentials = credentials.NewStaticCredentialsProvider(c.access, c.secretKey, "")
				_, d := diagnose(t, o)
				if d.Refusal != c.want || d.Answer == nil || d.Answer.Status/100 != 4 || d.Answer.Message == "" {
					t.Errorf("refusal %q, answer %+v; want %q", d.Refusal, d.Answer, c.want)
				}
				if d.Answer != nil && strings.Contains(d.Answer.Err.Error(), c.secretKey) {
					t.Errorf("the error quotes the secret key: %v", d.Answer.Err)
				}
				wantStopped(t, d)
			})
		}
		t.Run("none", func(t *testing.T) {
			for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
				"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CA_BUNDLE"} {
				t.Setenv(v, "")
			}
			t.Setenv("AWS_CONFIG_FILE", "/dev/null")
			t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
			t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
			o := opts
			o.Credentials = nil // the AWS chain, empty
			_, d := diagnose(t, o)
			if d.CredentialsErr == nil || d.CredentialsSource != "" {
				t.Errorf("credentials %q, %v: want none found", d.CredentialsSource, d.CredentialsErr)
			}
			// The endpoint is connected to, not asked.
			if e := d.Endpoints[0]; !e.OK() || e.Sent || e.Connect <= 0 || d.Answer != nil {
				t.Errorf("endpoint %+v, answer %+v", e, d.Answer)
			}
			wantStopped(t, d)
		})
	})
}

func TestDiagnose_MissingBucket_RefusalBucket_Stops(t *testing.T) {
	eachServer(t, func(t *testing.T, srv oracleServer) {
		_, d := diagnose(t, srv.Options("cairn-no-such-bucket"))
		if d.Refusal != "bucket" || d.Answer == nil || d.Answer.Status != 404 || d.Answer.Code != "NoSuchBucket" {
			t.Errorf("refusal %q, answer %+v", d.Refusal, d.Answer)
		}
		wantStopped(t, d)
	})
}

// A hung endpoint gets one attempt, given up by the backend's timeouts
// (or the caller's context, when it ends first), named.
func TestDiagnose_HungEndpoint_OneAttemptWithinItsTimeouts(t *testing.T) {
	t.Parallel()
	static := credentials.NewStaticCredentialsProvider("AK", "SK", "")
	for _, c := range []struct {
		name     string
		endpoint string
		edit     func(*s3.Options)
		ctx      time.Duration
		says     []string
	}{
		{"accepts, never answers", testserver.SilentEndpoint(t),
			func(o *s3.Options) { o.ResponseTimeout = time.Second }, time.Minute,
			[]string{"no answer from", "after 1 attempt", "sent no response headers within 1s (response timeout)"}},
		{"never accepts", testserver.NeverAcceptingEndpoint(t),
			func(o *s3.Options) { o.ConnectTimeout = time.Second }, time.Minute,
			[]string{"did not accept a connection within 1s (connect timeout)"}},
		{"the caller's deadline first", testserver.SilentEndpoint(t),
			func(o *s3.Options) { o.ResponseTimeout = 5 * time.Minute }, time.Second,
			[]string{"context deadline exceeded"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			opts := s3.Options{Bucket: "b", Endpoint: c.endpoint, Region: "garage", PathStyle: true,
				Credentials: static, HTTPClient: httpClient(t), Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}
			c.edit(&opts)
			b, err := s3.NewBackend(t.Context(), opts)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			ctx, cancel := context.WithTimeout(t.Context(), c.ctx)
			defer cancel()
			start := time.Now()
			d := b.Diagnose(ctx)
			took := time.Since(start)
			t.Logf("after %v: %+v", took.Round(time.Millisecond), d.Endpoints)
			// A second attempt would take as long again, and the default
			// timeouts 8s each: this bound tells one attempt from three.
			if took > 20*time.Second {
				t.Errorf("Diagnose took %v", took)
			}
			e := d.Endpoints[0]
			if err = e.ConnectErr; err == nil {
				err = e.Err
			}
			if e.OK() || e.Status != 0 || err == nil || d.Answer != nil {
				t.Fatalf("endpoint %+v, answer %+v", e, d.Answer)
			}
			for _, w := range c.says {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			var timeout interface{ Timeout() bool }
			if c.ctx == time.Minute && !(errors.As(err, &timeout) && timeout.Timeout()) {
				t.Errorf("error %v does not report Timeout()", err)
			}
			wantStopped(t, d)
		})
	}
}

// Each endpoint of a list is checked on its own; the first usable one
// decides, and the backend stays on the endpoint it was on.
func TestDiagnose_OneOfTwoEndpointsDown_TheOtherDecides(t *testing.T) {
	srv := garage.Start(t)
	bucket := srv.NewBucket(t)
	down := refusedPort(t)
	for _, c := range []struct {
		name   string
		eps    []string
		answer int // the endpoint that decides, -1 none
	}{
		{"second down", []string{srv.Endpoint, down}, 0},
		{"first down", []string{down, srv.Endpoint}, 1},
		{"both down", []string{down, testserver.SilentEndpoint(t)}, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := srv.Options(bucket)
			opts.Endpoint = strings.Join(c.eps, ",")
			opts.ResponseTimeout = 2 * time.Second
			b, d := diagnose(t, opts)
			if len(d.Endpoints) != 2 {
				t.Fatalf("endpoints %+v", d.Endpoints)
			}
			for i, e := range d.Endpoints {
				if e.Endpoint != c.eps[i] {
					t.Errorf("endpoint %d is %s, want %s", i, e.Endpoint, c.eps[i])
				}
				if e.Endpoint == down && (!errors.Is(e.ConnectErr, syscall.ECONNREFUSED) || e.Sent) {
					t.Errorf("endpoint %s (down): %+v", down, e)
				}
			}
			if c.answer < 0 {
				if d.Answer != nil {
					t.Errorf("answer %+v with every endpoint down", d.Answer)
				}
				wantStopped(t, d)
				return
			}
			if d.Answer != &d.Endpoints[c.answer] || d.Refusal != "" || d.Probe == nil || d.Probe.Err != nil {
				t.Fatalf("answer %+v, refusal %q, probe %+v", d.Answer, d.Refusal, d.Probe)
			}
			if len(d.Clocks) != 1 || d.Clocks[0].Endpoint != srv.Endpoint || d.Clocks[0].Err != nil {
				t.Errorf("clocks %+v: want only the usable endpoint's", d.Clocks)
			}
			if c.answer == 0 && b.CurrentEndpoint() != srv.Endpoint {
				t.Errorf("the backend moved to %s", b.CurrentEndpoint())
			}
		})
	}
}
