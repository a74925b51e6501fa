package s3

import (
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/cairnhq/state/backend"
)

// ConditionalMode says whether the backend uses conditional writes
// (If-None-Match / If-Match). The zero value is [ConditionalAuto].
type ConditionalMode string

const (
	// ConditionalAuto probes the server when the backend is created and
	// uses conditional writes only if the server demonstrably enforces
	// them. A server that ignores the headers is detected, not trusted.
	ConditionalAuto ConditionalMode = "auto"
	// ConditionalOn trusts the server to enforce conditional writes
	// without probing (AWS S3, MinIO, R2 and versitygw do).
	ConditionalOn ConditionalMode = "on"
	// ConditionalOff never sends conditions: the backend reports no
	// conditional writes and refuses conditional calls with
	// backend.ErrUnsupported.
	ConditionalOff ConditionalMode = "off"
)

// ParseConditionalMode parses "auto", "on" or "off"; the empty string is
// [ConditionalAuto].
func ParseConditionalMode(s string) (ConditionalMode, error) {
	switch ConditionalMode(s) {
	case "", ConditionalAuto:
		return ConditionalAuto, nil
	case ConditionalOn, ConditionalOff:
		return ConditionalMode(s), nil
	}
	return "", fmt.Errorf("s3: conditional mode %q: want auto, on or off", s)
}

// DefaultProbePrefix is where the conditional-write probe writes its
// throwaway object when Options.ProbePrefix is empty: the reserved prefix
// at the bucket's root.
const DefaultProbePrefix = ".cairn-state/"

// Options configure a [Backend]. Bucket is required; everything else has a
// default.
type Options struct {
	// Bucket is the bucket that holds the objects. Keys are relative to
	// the bucket's root.
	Bucket string
	// Endpoint is the server's base URL, e.g. "http://127.0.0.1:3900".
	// Empty means AWS S3 (or AWS_ENDPOINT_URL, through the AWS chain).
	Endpoint string
	// Region is the signing region. Empty means the AWS chain's region,
	// else "us-east-1". Garage wants its configured s3_region.
	Region string
	// PathStyle addresses the bucket in the URL path rather than in the
	// host name. Garage and most self-hosted servers need it.
	PathStyle bool
	// Conditional chooses whether conditional writes are used; the zero
	// value probes the server ([ConditionalAuto]).
	Conditional ConditionalMode
	// ProbePrefix is where the ConditionalAuto probe writes, deletes and
	// hides its object (".probe-<uuid>" below it). Empty means
	// [DefaultProbePrefix]; a caller with a root prefix passes
	// "ROOT/.cairn-state/" so that credentials scoped to the root suffice.
	ProbePrefix string
	// Credentials sign the requests. Nil means the standard AWS chain
	// (environment, shared config and credentials files, SSO, IMDS).
	Credentials aws.CredentialsProvider
	// HTTPClient sends the requests; nil means the SDK's default client.
	HTTPClient aws.HTTPClient
	// Logger receives the probe's outcome; nil means slog.Default().
	Logger *slog.Logger
}

// ParseURL parses a backend URL of the form
//
//	s3://BUCKET[/ROOT/PREFIX]?endpoint=URL&region=R&path_style=true&conditional=auto|on|off
//
// into Options and the root prefix ("ROOT/PREFIX", without leading or
// trailing slash; empty when absent). The backend itself is bucket-rooted:
// the caller applies the root prefix to its keys. All query parameters are
// optional; path_style defaults to true when an endpoint is given (every
// self-hosted server supports path-style, few support virtual hosts) and to
// false otherwise. Unknown parameters and credentials in the URL are
// refused, so that a typo cannot silently change the behaviour.
func ParseURL(raw string) (opts Options, root string, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Options{}, "", fmt.Errorf("s3 url: %w", err)
	}
	if u.Scheme != "s3" {
		return Options{}, "", fmt.Errorf("s3 url %q: scheme %q, want s3", redact(u), u.Scheme)
	}
	if u.User != nil {
		return Options{}, "", fmt.Errorf("s3 url %q: credentials do not belong in the URL; use the AWS credential chain (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, profiles)", redact(u))
	}
	if u.Opaque != "" || u.Host == "" {
		return Options{}, "", fmt.Errorf("s3 url %q: no bucket; want s3://BUCKET[/ROOT/PREFIX]", raw)
	}
	if u.Fragment != "" {
		return Options{}, "", fmt.Errorf("s3 url %q: unexpected fragment", raw)
	}
	opts.Bucket = u.Host
	if strings.Contains(opts.Bucket, ":") {
		return Options{}, "", fmt.Errorf("s3 url %q: bucket %q contains a port; put the server in ?endpoint=", raw, opts.Bucket)
	}
	root = strings.Trim(u.Path, "/")
	if root != "" {
		if err := backend.ValidateKey(root); err != nil {
			return Options{}, "", fmt.Errorf("s3 url %q: root prefix: %w", raw, err)
		}
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Options{}, "", fmt.Errorf("s3 url %q: query: %w", raw, err)
	}
	pathStyleSet := false
	for name, vals := range q {
		if len(vals) != 1 {
			return Options{}, "", fmt.Errorf("s3 url %q: parameter %q given %d times", raw, name, len(vals))
		}
		v := vals[0]
		switch name {
		case "endpoint":
			e, err := url.Parse(v)
			if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
				return Options{}, "", fmt.Errorf("s3 url %q: endpoint %q: want http(s)://HOST[:PORT]", raw, v)
			}
			opts.Endpoint = v
		case "region":
			opts.Region = v
		case "path_style":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return Options{}, "", fmt.Errorf("s3 url %q: path_style %q: want true or false", raw, v)
			}
			opts.PathStyle, pathStyleSet = b, true
		case "conditional":
			m, err := ParseConditionalMode(v)
			if err != nil {
				return Options{}, "", fmt.Errorf("s3 url %q: %w", raw, err)
			}
			opts.Conditional = m
		default:
			return Options{}, "", fmt.Errorf("s3 url %q: unknown parameter %q (known: endpoint, region, path_style, conditional)", raw, name)
		}
	}
	if !pathStyleSet {
		opts.PathStyle = opts.Endpoint != ""
	}
	if opts.Conditional == "" {
		opts.Conditional = ConditionalAuto
	}
	return opts, root, nil
}

func redact(u *url.URL) string { return u.Redacted() }
