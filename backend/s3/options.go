package s3

import (
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/s3diag"
)

// ConditionalMode says whether the backend uses conditional writes
// (If-None-Match / If-Match). The zero value is [ConditionalAuto].
type ConditionalMode string

const (
	// ConditionalAuto probes the server, once, the first time the
	// backend's capabilities are resolved (the lock does, before it
	// acquires), and uses conditional writes only if the server
	// demonstrably enforces them. A server that ignores
	// the headers is detected, not trusted. Until then the backend reports
	// no conditional writes and writes nothing of its own.
	ConditionalAuto ConditionalMode = "auto"
	// ConditionalOn trusts the server to enforce conditional writes
	// without probing (AWS S3, MinIO, R2 and versitygw do).
	ConditionalOn ConditionalMode = "on"
	// ConditionalOff never sends conditions: the backend reports no
	// conditional writes and refuses conditional calls with
	// backend.ErrUnsupported.
	ConditionalOff ConditionalMode = "off"
)

// parseConditionalMode parses "auto", "on" or "off"; the empty string is
// [ConditionalAuto].
func parseConditionalMode(s string) (ConditionalMode, error) {
	switch ConditionalMode(s) {
	case "", ConditionalAuto:
		return ConditionalAuto, nil
	case ConditionalOn, ConditionalOff:
		return ConditionalMode(s), nil
	}
	return "", fmt.Errorf("s3: conditional mode %q: want auto, on or off", s)
}

// defaultProbePrefix is where the conditional-write probe writes its
// throwaway object when Options.ProbePrefix is empty: the reserved prefix
// at the bucket's root.
const defaultProbePrefix = ".cairn-state/"

// Options configure a backend made by [New]. Bucket is required;
// everything else has a default. With the default timeouts and retries
// (ADR 0016), an endpoint that accepts connections and never answers fails
// an operation in about 3 × 8 s plus backoff (under 25 s), and a stopped
// server (connection refused) in well under a second.
type Options struct {
	// Bucket is the bucket that holds the objects. Keys are relative to
	// the bucket's root.
	Bucket string
	// Endpoint is the server's base URL, e.g. "http://127.0.0.1:3900", or
	// several base URLs separated by commas — the nodes of one cluster,
	// for users without a load balancer in front of them. Requests go to
	// the first; on a connection error, a timeout or a 5xx answer they
	// fail over to the next, and stay on the last one that answered (ADR
	// 0015). Empty means AWS S3 (or AWS_ENDPOINT_URL, through the AWS
	// chain). An endpoint may have a path but no credentials, query or
	// fragment.
	Endpoint string
	// Region is the signing region. Empty means the AWS chain's region,
	// else "us-east-1". Garage wants its configured s3_region.
	Region string
	// PathStyle addresses the bucket in the URL path rather than in the
	// host name. Garage and most self-hosted servers need it.
	PathStyle bool
	// Conditional chooses whether conditional writes are used; the zero
	// value probes the server when capabilities are first resolved
	// ([ConditionalAuto]).
	Conditional ConditionalMode
	// ProbePrefix is where the ConditionalAuto probe writes, deletes and
	// hides its object (".probe-<uuid>" below it). Empty means
	// defaultProbePrefix; a caller with a root prefix passes
	// "ROOT/.cairn-state/" so that credentials scoped to the root suffice.
	ProbePrefix string

	// ConnectTimeout bounds establishing a connection (dial and TLS
	// handshake). Zero means 5 s.
	ConnectTimeout time.Duration
	// ResponseTimeout is the longest the server may keep a request
	// waiting once connected: to take the next part of the request, to
	// send its response headers after the request was sent, and to send
	// the next part of a response body. Zero means 8 s.
	ResponseTimeout time.Duration
	// AttemptTimeout bounds one attempt from its start to the response
	// headers, request body included (a Get's body is then bounded by
	// ResponseTimeout between reads, not by this). Raise it for objects
	// of tens of megabytes on slow links. Zero means 60 s.
	AttemptTimeout time.Duration
	// MaxAttempts is how many times one operation is sent before its
	// error is returned; it is raised to the number of endpoints, so that
	// every endpoint is tried once. Only errors that can pass are retried
	// (connection errors, timeouts, 5xx, 429, 409
	// ConditionalRequestConflict); an answer such as access denied, no
	// such bucket or a wrong region is returned at once, and no attempt
	// starts once the context is done. Zero means 3.
	MaxAttempts int
	// MaxBackoff caps the jittered, doubling wait (from 100 ms) between
	// two attempts on the same endpoint; failing over to another endpoint
	// does not wait. Zero means 1 s.
	MaxBackoff time.Duration

	// Credentials sign the requests. Nil means the standard AWS chain
	// (environment, shared config and credentials files, SSO, IMDS).
	Credentials aws.CredentialsProvider
	// HTTPClient sends the requests; nil means the SDK's default client.
	// The timeouts above apply to any client built on net/http's
	// Transport (they work through net/http/httptrace).
	HTTPClient aws.HTTPClient
	// Logger receives the probe's outcome and failovers; nil means
	// slog.Default().
	Logger *slog.Logger
}

// withDefaults returns o with zero timeouts and retries replaced by the
// defaults, or an error naming a negative one.
func (o Options) withDefaults() (Options, error) {
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"ConnectTimeout", &o.ConnectTimeout, s3diag.DefaultConnectTimeout},
		{"ResponseTimeout", &o.ResponseTimeout, s3diag.DefaultResponseTimeout},
		{"AttemptTimeout", &o.AttemptTimeout, s3diag.DefaultAttemptTimeout},
		{"MaxBackoff", &o.MaxBackoff, s3diag.DefaultMaxBackoff},
	} {
		switch {
		case *d.v < 0:
			return o, fmt.Errorf("s3: Options.%s is negative (%v)", d.name, *d.v)
		case *d.v == 0:
			*d.v = d.def
		}
	}
	switch {
	case o.MaxAttempts < 0:
		return o, fmt.Errorf("s3: Options.MaxAttempts is negative (%d)", o.MaxAttempts)
	case o.MaxAttempts == 0:
		o.MaxAttempts = s3diag.DefaultMaxAttempts
	}
	return o, nil
}

// ParseEndpoints splits an [Options.Endpoint] value into its base URLs and
// checks each: http or https, a host, no credentials, query or fragment.
// The empty string is no endpoint (AWS). Errors never repeat credentials.
func ParseEndpoints(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	seen := make(map[string]bool, len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(p)
		parts[i] = p
		if p == "" {
			return nil, fmt.Errorf("s3: endpoint list %q has an empty entry", redactEndpoints(s))
		}
		e, err := url.Parse(p)
		if err != nil {
			return nil, fmt.Errorf("s3: endpoint %q: want http(s)://HOST[:PORT][/PATH]", redactEndpoint(p))
		}
		switch {
		case e.User != nil:
			return nil, fmt.Errorf("s3: endpoint %q: credentials do not belong in the endpoint; use the AWS credential chain (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, profiles)", redactEndpoint(p))
		case e.Scheme != "http" && e.Scheme != "https" || e.Host == "" || e.Opaque != "":
			return nil, fmt.Errorf("s3: endpoint %q: want http(s)://HOST[:PORT][/PATH]", redactEndpoint(p))
		case e.RawQuery != "" || e.ForceQuery || e.Fragment != "":
			return nil, fmt.Errorf("s3: endpoint %q: an endpoint takes no query or fragment", redactEndpoint(p))
		case seen[p]:
			return nil, fmt.Errorf("s3: endpoint %q is listed twice", p)
		}
		seen[p] = true
	}
	return parts, nil
}

// ParseURL parses a backend URL of the form
//
//	s3://BUCKET[/ROOT/PREFIX]?endpoint=URL[,URL…]&region=R&path_style=true&conditional=auto|on|off
//
// into Options and the root prefix ("ROOT/PREFIX", without leading or
// trailing slash; empty when absent). The backend itself is bucket-rooted:
// the caller applies the root prefix to its keys. The scheme is
// case-insensitive (S3:// too). All query parameters are optional:
//
//   - endpoint: the server's base URL, or several separated by commas, in
//     order of preference (the nodes of one cluster; [Options.Endpoint]);
//   - region: the signing region;
//   - path_style: true or false; defaults to true when an endpoint is
//     given (every self-hosted server supports path-style, few support
//     virtual hosts) and to false otherwise;
//   - conditional: auto (probe when first needed), on or off;
//   - connect_timeout, response_timeout, attempt_timeout, max_backoff: Go
//     durations such as 5s or 500ms ([Options.ConnectTimeout] and the
//     others; defaults 5s, 8s, 60s, 1s);
//   - max_attempts: a positive integer (default 3).
//
// Unknown parameters and credentials in the URL or in an endpoint are
// refused, so that a typo cannot silently change the behaviour. Errors
// show the URL with its credentials and the values of parameters that are
// not known ones replaced by "REDACTED", so they never repeat a secret.
func ParseURL(raw string) (opts Options, root string, err error) {
	shown := redactURL(raw)
	fail := func(format string, args ...any) (Options, string, error) {
		return Options{}, "", fmt.Errorf("s3 url %q: "+format, append([]any{shown}, args...)...)
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse's error repeats the whole URL.
		return fail("not a URL")
	}
	if u.Scheme != "s3" { // url.Parse lower-cases the scheme
		return fail("scheme %q, want s3", u.Scheme)
	}
	if u.User != nil {
		return fail("credentials do not belong in the URL; use the AWS credential chain (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, profiles)")
	}
	if u.Opaque != "" || u.Host == "" {
		return fail("no bucket; want s3://BUCKET[/ROOT/PREFIX]")
	}
	if u.Fragment != "" {
		return fail("unexpected fragment")
	}
	opts.Bucket = u.Host
	if strings.Contains(opts.Bucket, ":") {
		return fail("bucket %q contains a port; put the server in ?endpoint=", opts.Bucket)
	}
	root = strings.Trim(u.Path, "/")
	if root != "" {
		if err := backend.ValidateKey(root); err != nil {
			return fail("root prefix: %v", err)
		}
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return fail("the query is not valid URL encoding")
	}
	pathStyleSet := false
	for _, name := range slices.Sorted(maps.Keys(q)) { // a stable order: the same URL, the same error
		vals := q[name]
		if !knownParams[name] {
			if near := nearestParam(name); near != "" && plainName.MatchString(name) && !secretLooking(name) {
				return fail("unknown parameter %s: did you mean %q? (known: %s)", paramName(name), near, strings.Join(knownParamList, ", "))
			}
			return fail("unknown parameter %s (known: %s)", paramName(name), strings.Join(knownParamList, ", "))
		}
		if len(vals) != 1 {
			return fail("parameter %q given %d times (several endpoints go in one endpoint=, separated by commas)", name, len(vals))
		}
		v := vals[0]
		switch name {
		case "endpoint":
			if _, err := ParseEndpoints(v); err != nil {
				return fail("%v", strings.TrimPrefix(err.Error(), "s3: "))
			}
			opts.Endpoint = v
		case "region":
			opts.Region = v
		case "path_style":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fail("path_style %s: want true or false", showValue(v))
			}
			opts.PathStyle, pathStyleSet = b, true
		case "conditional":
			m, err := parseConditionalMode(v)
			if err != nil {
				return fail("conditional mode %s: want auto, on or off", showValue(v))
			}
			opts.Conditional = m
		case "connect_timeout", "response_timeout", "attempt_timeout", "max_backoff":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return fail("%s %s: want a positive duration such as 5s or 500ms", name, showValue(v))
			}
			switch name {
			case "connect_timeout":
				opts.ConnectTimeout = d
			case "response_timeout":
				opts.ResponseTimeout = d
			case "attempt_timeout":
				opts.AttemptTimeout = d
			case "max_backoff":
				opts.MaxBackoff = d
			}
		case "max_attempts":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return fail("max_attempts %s: want a positive integer", showValue(v))
			}
			opts.MaxAttempts = n
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

// knownParamList are ParseURL's query parameters, in the order its
// errors list them.
var knownParamList = []string{
	"endpoint", "region", "path_style", "conditional",
	"connect_timeout", "response_timeout", "attempt_timeout", "max_attempts", "max_backoff",
}

var knownParams = func() map[string]bool {
	m := make(map[string]bool, len(knownParamList))
	for _, p := range knownParamList {
		m[p] = true
	}
	return m
}()

// plainName is what a parameter name must look like to be repeated in an
// error: a short lower-case word, as a mistyped known name would be.
var plainName = regexp.MustCompile(`^[a-z][a-z_]{0,31}$`)

// nearestParam returns the known parameter an unknown name is most likely
// a typo of — within two edits (one for short names), a swap of two
// neighbouring letters counting as one — or "" when none is that close.
func nearestParam(name string) string {
	best, bestD := "", 3
	for _, p := range knownParamList {
		limit := 2
		if len(p) <= 6 {
			limit = 1
		}
		if d := editDistance(name, p); d <= limit && d < bestD {
			best, bestD = p, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and swaps of neighbours.
func editDistance(a, b string) int {
	prev2, prev, cur := make([]int, len(b)+1), make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// paramName quotes an unknown parameter's name for an error, unless it
// could be a secret pasted in the wrong place.
func paramName(name string) string {
	if plainName.MatchString(name) && !secretLooking(name) {
		return strconv.Quote(name)
	}
	return "(a name that is not shown, in case it is a secret)"
}

// secretLooking reports whether a parameter name suggests a secret value.
func secretLooking(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"secret", "key", "token", "password", "passwd", "credential", "signature", "auth"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// maxShownValue is the longest parameter value an error repeats.
const maxShownValue = 16

// showValue quotes a parameter's value for an error, unless it is long
// enough to be a secret pasted in the wrong place (every valid value of a
// parameter but endpoint is short).
func showValue(v string) string {
	if len(v) > maxShownValue {
		return fmt.Sprintf("(a value of %d characters, not shown)", len(v))
	}
	return strconv.Quote(v)
}

// redactURL returns raw fit for an error or a log line: credentials in the
// authority or in an endpoint replaced by REDACTED, and so are the values
// of parameters that are not known ones (they might be secrets pasted in
// the wrong place) and the names that could be secrets. A URL too broken to
// take apart is not shown.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL, not shown)"
	}
	if u.User != nil {
		u.User = url.User("REDACTED")
	}
	if _, err := url.ParseQuery(u.RawQuery); err != nil {
		u.RawQuery = "(query not shown)"
		return u.String()
	}
	var parts []string
	for _, kv := range strings.Split(u.RawQuery, "&") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			parts = append(parts, "REDACTED")
			continue
		}
		switch {
		case name == "endpoint":
			ev, err := url.QueryUnescape(v)
			if err != nil {
				ev = "REDACTED"
			}
			parts = append(parts, "endpoint="+redactEndpoints(ev))
		case knownParams[name]:
			if val, err := url.QueryUnescape(v); err != nil || len(val) > maxShownValue {
				parts = append(parts, k+"=REDACTED")
			} else {
				parts = append(parts, kv)
			}
		case plainName.MatchString(name) && !secretLooking(name):
			// The value of an unknown parameter is not shown (it might be
			// a secret pasted in the wrong place), but nor is it called
			// one: the error names the parameter.
			parts = append(parts, k+"=…")
		default:
			parts = append(parts, "REDACTED=REDACTED")
		}
	}
	u.RawQuery = strings.Join(parts, "&")
	u.Fragment = ""
	return u.String()
}

// redactEndpoints redacts the credentials of every endpoint of a list.
func redactEndpoints(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = redactEndpoint(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}

// redactEndpoint returns an endpoint without its credentials, query or
// fragment; one too broken to take apart is not shown.
func redactEndpoint(p string) string {
	e, err := url.Parse(p)
	if err != nil {
		if strings.Contains(p, "@") {
			return "(endpoint not shown)"
		}
		return p
	}
	if e.User != nil {
		e.User = url.User("REDACTED")
	}
	if e.RawQuery != "" {
		e.RawQuery = "REDACTED"
	}
	e.Fragment = ""
	return e.String()
}
