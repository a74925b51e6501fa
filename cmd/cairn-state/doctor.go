package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"filippo.io/age"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	state "github.com/cairnhq/state"
	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/s3"
	"github.com/cairnhq/state/envelope"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// The statuses of a doctor check (ADR 0025). Only fail makes the store
// unusable (exit 1); skip is a check that could not run because an earlier
// one failed.
const (
	statusOK   = "ok"
	statusWarn = "warn"
	statusFail = "fail"
	statusSkip = "skip"
)

// The checks, in the order doctor runs them; --json names them so.
const (
	checkURL             = "url"
	checkDirectory       = "directory"
	checkEndpoint        = "endpoint"
	checkCredentials     = "credentials"
	checkRegion          = "region"
	checkBucket          = "bucket"
	checkConditional     = "conditional-writes"
	checkLockMode        = "lock-mode"
	checkListConsistency = "list-consistency"
	checkClock           = "clock"
	checkIdentity        = "identity"
	checkMembership      = "membership"
	checkLock            = "lock"
)

// clockWarnAfter is the offset between the storage's clock and this
// machine's above which doctor warns. S3 dates have one-second resolution,
// so smaller offsets are not worth a word.
const clockWarnAfter = 5 * time.Second

// doctorDoc is doctor's --json document.
type doctorDoc struct {
	// Usable is true when no check failed (warnings allowed): exit 0.
	Usable   bool       `json:"usable"`
	URL      string     `json:"url"`
	Failed   int        `json:"failed"`
	Warnings int        `json:"warnings"`
	Checks   []checkDoc `json:"checks"`
}

// checkDoc is one check's result: a line of human output.
type checkDoc struct {
	Name    string `json:"name"`
	Status  string `json:"status"`
	Finding string `json:"finding"`
	Hint    string `json:"hint,omitempty"`
	Facts   *facts `json:"facts,omitempty"`
}

// facts are what a check measured or read, for scripts; each check sets
// the fields that concern it. Durations are in seconds.
type facts struct {
	Backend   string   `json:"backend,omitempty"` // "s3" or "file"
	Directory string   `json:"directory,omitempty"`
	Mode      string   `json:"mode,omitempty"` // permission bits, octal
	Bucket    string   `json:"bucket,omitempty"`
	Root      string   `json:"root,omitempty"`
	Region    string   `json:"region,omitempty"`
	Endpoint  string   `json:"endpoint,omitempty"`
	Endpoints []string `json:"endpoints,omitempty"`

	Conditional            string   `json:"conditional,omitempty"` // the URL's mode
	ConnectTimeoutSeconds  *float64 `json:"connect_timeout_seconds,omitempty"`
	ResponseTimeoutSeconds *float64 `json:"response_timeout_seconds,omitempty"`
	AttemptTimeoutSeconds  *float64 `json:"attempt_timeout_seconds,omitempty"`
	MaxAttempts            int      `json:"max_attempts,omitempty"`
	MaxBackoffSeconds      *float64 `json:"max_backoff_seconds,omitempty"`

	ConnectSeconds    *float64 `json:"connect_seconds,omitempty"`
	AnswerSeconds     *float64 `json:"answer_seconds,omitempty"`
	HTTPStatus        int      `json:"http_status,omitempty"`
	ErrorCode         string   `json:"error_code,omitempty"`
	Error             string   `json:"error,omitempty"`
	CredentialsSource string   `json:"credentials_source,omitempty"`

	ProbePrefix      string `json:"probe_prefix,omitempty"`
	PutConditions    *bool  `json:"put_conditions,omitempty"`
	DeleteConditions *bool  `json:"delete_conditions,omitempty"`
	Evidence         string `json:"evidence,omitempty"`
	LockMode         string `json:"lock_mode,omitempty"`

	OffsetSeconds      *float64  `json:"offset_seconds,omitempty"`
	UncertaintySeconds *float64  `json:"uncertainty_seconds,omitempty"`
	StorageTime        time.Time `json:"storage_time,omitzero"`
	LocalTime          time.Time `json:"local_time,omitzero"`

	File       string   `json:"file,omitempty"`
	Identities int      `json:"identities,omitempty"`
	Recipients []string `json:"recipients,omitempty"`

	Object  string `json:"object,omitempty"`
	StoreID string `json:"store_id,omitempty"`

	Present             *bool      `json:"present,omitempty"`
	Liveness            string     `json:"liveness,omitempty"`
	Holder              *holderDoc `json:"holder,omitempty"`
	HeartbeatAgeSeconds *float64   `json:"heartbeat_age_seconds,omitempty"`
	StaleInSeconds      *float64   `json:"stale_in_seconds,omitempty"`
	Epoch               *uint64    `json:"epoch,omitempty"`
	NextBoot            string     `json:"next_boot,omitempty"`
	Contenders          int        `json:"contenders,omitempty"`
}

// runDoctor checks the store end to end and prints one line per check. It
// writes nothing but, on S3, the conditional-write probe's throwaway
// object (removed again); it takes no lock and creates no store.
func runDoctor(ctx context.Context, a *app, args []string) error {
	fs := a.flags("doctor")
	if _, err := a.parse(fs, args, 0, 0); err != nil {
		return err
	}
	if a.url == "" {
		return usagef("no store: pass --url URL or set CAIRN_STATE_URL (file:///path or s3://bucket?endpoint=...)")
	}
	d := &doctor{a: a}
	// Every storage check shares the budget: on storage that stops
	// answering, the S3 timeouts derived from it fire first, naming the
	// endpoint; this deadline is the backstop. Local checks do not wait.
	nctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	d.run(nctx)
	if ctx.Err() != nil {
		return fmt.Errorf("doctor: interrupted: %w", ctx.Err())
	}
	return d.report()
}

// doctor is one run of the checks and what they found so far.
type doctor struct {
	a      *app
	checks []checkDoc

	b        backend.Backend // the store's backend, opened as the other commands open it
	root     string
	s3       *s3Store  // nil for a file: store
	storage  bool      // the storage answered and accepted us: its checks may go on
	why      string    // why the storage checks are skipped, when they are
	lockMode lock.Mode // the mode this configuration's lock would use; "" unknown
	keys     []age.Identity
	keysOK   bool             // identities configured, and every file loaded
	storeID  envelope.StoreID // of a store without a manifest: the id its objects carry
	store    *store.Store     // connected through its manifest, when it has one
}

// s3Store is what doctor knows of an s3:// store.
type s3Store struct {
	opts      s3.Options // as parsed, with the --timeout derived timeouts
	endpoints []string   // "aws" when none is given
	answered  []string   // endpoints that answered a signed request
}

func (d *doctor) add(name, status, finding, hint string, f *facts) {
	d.checks = append(d.checks, checkDoc{Name: name, Status: status, Finding: finding, Hint: hint, Facts: f})
}

// skip records a check that cannot run because of an earlier one.
func (d *doctor) skip(name, why string) { d.add(name, statusSkip, "not checked: "+why, "", nil) }

func (d *doctor) run(ctx context.Context) {
	if d.checkURL(ctx) {
		if d.s3 != nil {
			d.checkS3Access(ctx)
		}
		d.checkConditionalWrites(ctx)
		d.checkClock(ctx)
	}
	d.checkIdentities()
	d.checkMembership(ctx)
	d.checkLock(ctx)
}

// report prints the checks (or the JSON document) and returns the run's
// error: nil when the store is usable.
func (d *doctor) report() error {
	doc := doctorDoc{URL: state.RedactURL(d.a.url), Checks: d.checks}
	var failed []string
	for i := range doc.Checks {
		c := &doc.Checks[i]
		c.Finding, c.Hint = d.a.redact(c.Finding), d.a.redact(c.Hint)
		if c.Facts != nil {
			c.Facts.Error = d.a.redact(c.Facts.Error)
			c.Facts.Evidence = d.a.redact(c.Facts.Evidence)
		}
		switch c.Status {
		case statusFail:
			failed = append(failed, c.Name)
		case statusWarn:
			doc.Warnings++
		}
	}
	doc.Failed, doc.Usable = len(failed), len(failed) == 0
	if d.a.json {
		d.a.emit(doc)
	} else {
		for _, c := range doc.Checks {
			line := fmt.Sprintf("%-4s  %s: %s", c.Status, c.Name, c.Finding)
			if c.Hint != "" {
				line += " — " + c.Hint
			}
			d.a.printf("%s\n", line)
		}
	}
	if len(failed) > 0 {
		return &reportedError{msg: fmt.Sprintf("doctor: the store is not usable: %s failed (%s)",
			plural(len(failed), "check"), strings.Join(dedupe(failed), ", "))}
	}
	if !d.a.json {
		d.a.printf("doctor: the store is usable (%s)\n", plural(doc.Warnings, "warning"))
	}
	return nil
}

func dedupe(names []string) []string {
	var out []string
	for _, n := range names {
		if len(out) == 0 || out[len(out)-1] != n {
			out = append(out, n)
		}
	}
	return out
}

// checkURL parses the URL and opens the backend as the other commands do
// (nothing is sent yet). It reports whether the storage checks can run.
func (d *doctor) checkURL(ctx context.Context) bool {
	raw := d.a.url
	scheme, rest, _ := strings.Cut(raw, ":")
	const fix = "fix --url (or CAIRN_STATE_URL): file:///abs/path, file:rel/path or s3://BUCKET[/ROOT]?endpoint=URL&region=R (cairn-state help)"
	isS3 := strings.EqualFold(scheme, "s3") && strings.HasPrefix(rest, "//")
	var f *facts
	if isS3 {
		opts, root, err := s3.ParseURL("s3:" + rest)
		if err != nil {
			d.add(checkURL, statusFail, err.Error(), fix, nil)
			d.why = "the URL does not parse"
			return false
		}
		s3Budget(d.a.timeout)(&opts)
		t := &s3Store{opts: opts}
		t.endpoints, _ = s3.ParseEndpoints(opts.Endpoint)
		if len(t.endpoints) == 0 {
			t.endpoints = []string{"aws"}
		}
		d.s3, d.root = t, root
		attempts := opts.MaxAttempts
		if attempts == 0 {
			attempts = s3.DefaultMaxAttempts
		}
		attemptTimeout := opts.AttemptTimeout
		if attemptTimeout == 0 {
			attemptTimeout = s3.DefaultAttemptTimeout
		}
		f = &facts{Backend: "s3", Bucket: opts.Bucket, Root: root, Region: opts.Region, Endpoints: t.endpoints,
			Conditional: string(opts.Conditional), ConnectTimeoutSeconds: seconds(opts.ConnectTimeout),
			ResponseTimeoutSeconds: seconds(opts.ResponseTimeout), AttemptTimeoutSeconds: seconds(attemptTimeout),
			MaxAttempts: max(attempts, len(t.endpoints)), MaxBackoffSeconds: seconds(opts.MaxBackoff)}
	}
	b, root, err := state.OpenBackend(ctx, raw, state.BackendOptions{Logger: d.a.logger, MustExist: true, S3: s3Budget(d.a.timeout)})
	switch {
	case errors.Is(err, state.ErrNoStore):
		dir := fileDir(raw)
		d.add(checkURL, statusOK, "a local directory, "+dir, "", &facts{Backend: "file", Directory: dir})
		d.add(checkDirectory, statusFail, err.Error(), "check --url (or CAIRN_STATE_URL); the first write (cairn-state put, or the application's first boot) creates it, mode 0700", &facts{Directory: dir})
		d.why = "there is no store"
		return false
	case errors.Is(err, state.ErrBadURL):
		d.add(checkURL, statusFail, err.Error(), fix, nil)
		d.why = "the URL does not parse"
		return false
	case err != nil:
		d.add(checkURL, statusFail, err.Error(), "", nil)
		d.why = "the backend could not be opened"
		return false
	}
	if c, ok := b.(io.Closer); ok {
		d.a.closers = append(d.a.closers, c)
	}
	d.b, d.root = b, root
	if !isS3 {
		dir := fileDir(raw)
		d.add(checkURL, statusOK, "a local directory, "+dir, "", &facts{Backend: "file", Directory: dir})
		d.checkDir(dir)
		d.storage = true
		return true
	}
	o := d.s3.opts
	where := fmt.Sprintf("S3 bucket %q", o.Bucket)
	if root != "" {
		where += fmt.Sprintf(", root %q", root)
	}
	region := o.Region
	if region == "" {
		region = "from the AWS configuration"
	} else {
		region = fmt.Sprintf("%q", region)
	}
	d.add(checkURL, statusOK, fmt.Sprintf("%s on %s, region %s, conditional=%s; each attempt waits %s to connect and %s for an answer (--timeout %s)",
		where, strings.Join(d.s3.endpoints, ", "), region, o.Conditional, o.ConnectTimeout, o.ResponseTimeout, d.a.timeout), "", f)
	return true
}

// fileDir is the absolute directory of a file: URL, for messages.
func fileDir(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	p := u.Path
	if u.Opaque != "" {
		if p, err = url.PathUnescape(u.Opaque); err != nil {
			return raw
		}
	}
	if abs, err := filepath.Abs(filepath.FromSlash(p)); err == nil {
		return abs
	}
	return p
}

// checkDir looks at a file: store's directory: others should not see
// the state names.
func (d *doctor) checkDir(dir string) {
	fi, err := os.Stat(dir)
	if err != nil {
		d.add(checkDirectory, statusFail, err.Error(), "check --url and the directory's permissions", &facts{Directory: dir})
		return
	}
	perm := fi.Mode().Perm()
	f := &facts{Directory: dir, Mode: fmt.Sprintf("%04o", perm)}
	if perm&0o077 != 0 {
		d.add(checkDirectory, statusWarn, fmt.Sprintf("%s has mode %04o: others may list the state names and sizes (the objects themselves are 0600)", dir, perm),
			"chmod 700 "+dir, f)
		return
	}
	d.add(checkDirectory, statusOK, fmt.Sprintf("%s exists, mode %04o", dir, perm), "", f)
}

// endpointResult is what one endpoint did with a connection and one
// signed request.
type endpointResult struct {
	endpoint string
	dialErr  error
	dialTime time.Duration
	sent     bool  // a signed request was made (credentials found)
	err      error // the request's error; nil when it succeeded
	answered bool  // an HTTP answer came back (any status)
	status   int
	code     string // the S3 error code
	message  string // the server's error message
	took     time.Duration
}

// checkS3Access connects to each endpoint and sends each one signed
// request (a one-attempt listing under the store's reserved prefix), then
// judges the credentials, the region and the bucket from the answer.
func (d *doctor) checkS3Access(ctx context.Context) {
	t := d.s3
	// The credentials come from the AWS chain, as the backend's do;
	// resolving them first tells "none found" from a refusal.
	var credSource string
	effectiveRegion := t.opts.Region
	credErr := func() error {
		var lo []func(*config.LoadOptions) error
		if t.opts.Region != "" {
			lo = append(lo, config.WithRegion(t.opts.Region))
		}
		cfg, err := config.LoadDefaultConfig(ctx, lo...)
		if err != nil {
			return err
		}
		if effectiveRegion == "" {
			effectiveRegion = cmp.Or(cfg.Region, "us-east-1") // as the backend resolves it
		}
		if cfg.Credentials == nil {
			return errors.New("no credentials in the AWS configuration")
		}
		c, err := cfg.Credentials.Retrieve(ctx)
		if err != nil {
			return err
		}
		credSource = c.Source
		return nil
	}()

	results := make([]endpointResult, len(t.endpoints))
	var wg sync.WaitGroup
	for i, ep := range t.endpoints {
		wg.Go(func() { results[i] = d.tryEndpoint(ctx, ep, credErr == nil) })
	}
	wg.Wait()

	var first *endpointResult
	for i := range results {
		if r := &results[i]; r.healthy() {
			t.answered = append(t.answered, r.endpoint)
			if first == nil {
				first = r
			}
		}
	}
	for i := range results {
		d.endpointLine(&results[i], first != nil)
	}
	if credErr != nil {
		d.add(checkCredentials, statusFail, "no credentials found in the AWS chain: "+credErr.Error(),
			"set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) for the key the server gave you; credentials never go in the URL", nil)
		d.skip(checkRegion, "no credentials")
		d.skip(checkBucket, "no credentials")
		d.why = "no credentials"
		return
	}
	if first == nil {
		d.why = "no endpoint answered"
		for _, c := range []string{checkCredentials, checkRegion, checkBucket} {
			d.skip(c, d.why)
		}
		return
	}
	d.judgeAccess(first, credSource, effectiveRegion)
}

// healthy reports whether the endpoint answered in a way that makes it
// usable: any answer but a server error.
func (r *endpointResult) healthy() bool {
	return r.dialErr == nil && (!r.sent || r.answered && r.status < 500)
}

// tryEndpoint connects to one endpoint and, when there are credentials,
// sends it one signed request through a one-endpoint, one-attempt backend.
func (d *doctor) tryEndpoint(ctx context.Context, ep string, creds bool) endpointResult {
	o := d.s3.opts
	r := endpointResult{endpoint: ep}
	if ep != "aws" {
		u, err := url.Parse(ep)
		if err != nil {
			r.dialErr = err
			return r
		}
		host := u.Host
		if u.Port() == "" {
			if u.Scheme == "https" {
				host = net.JoinHostPort(u.Hostname(), "443")
			} else {
				host = net.JoinHostPort(u.Hostname(), "80")
			}
		}
		dctx, cancel := context.WithTimeout(ctx, o.ConnectTimeout)
		start := time.Now()
		c, err := (&net.Dialer{}).DialContext(dctx, "tcp", host)
		r.dialTime = time.Since(start)
		timedOut := errors.Is(dctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
		cancel()
		if err != nil {
			if timedOut {
				err = fmt.Errorf("%s did not accept a connection within %s (connect timeout)", host, o.ConnectTimeout)
			}
			r.dialErr = err
			return r
		}
		c.Close()
	}
	if !creds {
		return r
	}
	one := o
	one.Endpoint = ""
	if ep != "aws" {
		one.Endpoint = ep
	}
	one.MaxAttempts = 1
	one.Conditional = s3.ConditionalOff // no probe: this backend only lists
	one.Logger = d.a.logger
	b, err := s3.New(ctx, one)
	if err != nil {
		r.sent, r.err = true, err
		return r
	}
	defer b.Close()
	r.sent = true
	start := time.Now()
	err = b.List(ctx, reservedPrefix(d.root), func(backend.Object) error { return errStopListing })
	r.took = time.Since(start)
	if errors.Is(err, errStopListing) {
		err = nil
	}
	r.err = err
	if err == nil {
		r.answered, r.status = true, 200
		return r
	}
	// An HTTP answer, whatever its status; a request that was not sent,
	// or whose answer did not come, has no response (the SDK still wraps
	// it in a ResponseError).
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.Response != nil && re.HTTPStatusCode() != 0 {
		r.answered, r.status = true, re.HTTPStatusCode()
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		r.code, r.message = api.ErrorCode(), api.ErrorMessage()
	}
	return r
}

// short formats a short duration for humans: "0.2ms", "3ms", "1.2s".
func short(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

// errStopListing ends a listing after its first object.
var errStopListing = errors.New("stop listing")

// reservedPrefix is the key prefix of a store's objects.
func reservedPrefix(root string) string {
	if root == "" {
		return store.Prefix
	}
	return root + "/" + store.Prefix
}

// attemptCause is the part of a backend error after "after N attempts: ".
var attemptCause = regexp.MustCompile(`after \d+ attempts?: (.*)$`)

func cause(err error) string {
	msg := err.Error()
	if m := attemptCause.FindStringSubmatch(msg); m != nil {
		return m[1]
	}
	return msg
}

// endpointLine reports one endpoint. A failing endpoint is a warning when
// another answers (requests fail over to it), else a failure.
func (d *doctor) endpointLine(r *endpointResult, another bool) {
	f := &facts{Endpoint: r.endpoint}
	bad := statusFail
	also := ""
	if another && len(d.s3.endpoints) > 1 {
		bad, also = statusWarn, "; requests fail over to the other endpoints meanwhile"
	}
	if r.dialErr != nil {
		f.Error = r.dialErr.Error()
		var dnsErr *net.DNSError
		var finding, hint string
		switch {
		case errors.As(r.dialErr, &dnsErr):
			finding = fmt.Sprintf("%s: cannot resolve the host name: %v", r.endpoint, dnsErr)
			hint = "check the host in endpoint= (and this machine's DNS)"
		case strings.Contains(r.dialErr.Error(), "connection refused"):
			finding = fmt.Sprintf("%s refused the connection: nothing listens there", r.endpoint)
			hint = "start the server, or fix the host and port in endpoint="
		case strings.Contains(r.dialErr.Error(), "connect timeout"):
			finding = fmt.Sprintf("%s: %v", r.endpoint, r.dialErr)
			hint = "the host is down, or a firewall drops the connection: check the address and port in endpoint="
		default:
			finding = fmt.Sprintf("%s: cannot connect: %v", r.endpoint, r.dialErr)
			hint = "check the server and endpoint= in the URL"
		}
		d.add(checkEndpoint, bad, finding, hint+also, f)
		return
	}
	if r.endpoint != "aws" {
		f.ConnectSeconds = seconds(r.dialTime)
	}
	connected := fmt.Sprintf("%s accepted a connection in %s", r.endpoint, short(r.dialTime))
	if r.endpoint == "aws" {
		connected = "aws (the SDK resolves the endpoint)"
	}
	switch {
	case !r.sent:
		d.add(checkEndpoint, statusOK, connected+"; no request sent (no credentials)", "", f)
	case !r.answered:
		f.Error = r.err.Error()
		d.add(checkEndpoint, bad, fmt.Sprintf("%s but did not answer a request: %s", connected, cause(r.err)),
			"the server, or a proxy in front of it, is hung or is not an S3 server: restart it, or fix endpoint="+also, f)
	case r.status >= 500:
		f.HTTPStatus, f.ErrorCode, f.Error = r.status, r.code, r.err.Error()
		d.add(checkEndpoint, bad, fmt.Sprintf("%s but answered %d %s: %s", connected, r.status, r.code, r.message),
			"the server is up but failing: look at its log (Garage: a node without its layout, or without quorum, answers 5xx)"+also, f)
	default:
		f.HTTPStatus, f.ErrorCode, f.AnswerSeconds = r.status, r.code, seconds(r.took)
		what := fmt.Sprintf("HTTP %d", r.status)
		if r.code != "" {
			what += " " + r.code
		}
		d.add(checkEndpoint, statusOK, fmt.Sprintf("%s and answered a signed request in %s (%s)", connected, short(r.took), what), "", f)
	}
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

// judgeAccess turns one endpoint's answer into the credentials, region and
// bucket lines.
func (d *doctor) judgeAccess(r *endpointResult, credSource, effectiveRegion string) {
	o := d.s3.opts
	region := fmt.Sprintf("%q", effectiveRegion)
	if o.Region == "" {
		region += " (from the AWS configuration: the URL sets no region=)"
	}
	f := func() *facts {
		return &facts{Endpoint: r.endpoint, HTTPStatus: r.status, ErrorCode: r.code, CredentialsSource: credSource, Region: effectiveRegion, Bucket: o.Bucket}
	}
	server := ""
	if r.message != "" {
		server = ": " + r.message
	}
	okCreds := func() {
		d.add(checkCredentials, statusOK, fmt.Sprintf("accepted by %s (from %s)", r.endpoint, credSource), "", f())
	}
	okRegion := func() { d.add(checkRegion, statusOK, region+" accepted", "", f()) }
	switch {
	case r.err == nil:
		okCreds()
		okRegion()
		d.add(checkBucket, statusOK, fmt.Sprintf("%q exists and lists under %s", o.Bucket, reservedPrefix(d.root)), "", f())
		d.storage = true
		return
	case regionCodes[r.code]:
		d.skip(checkCredentials, "the server refused the signing region first")
		fe := f()
		fe.Error = r.err.Error()
		d.add(checkRegion, statusFail, fmt.Sprintf("%s refused region %s (%d %s%s)", r.endpoint, region, r.status, r.code, server),
			"set region= in the URL to the server's region (Garage: its s3_region, often \"garage\"; AWS: the bucket's region)", fe)
		d.skip(checkBucket, "the region is wrong")
		d.why = "the region is wrong"
	case r.code == "RequestTimeTooSkewed":
		fe := f()
		fe.Error = r.err.Error()
		d.add(checkCredentials, statusFail, fmt.Sprintf("%s refused the request's time (%d %s%s): this machine's clock and the server's differ by more than S3 allows (15 minutes)", r.endpoint, r.status, r.code, server),
			"fix the clock of this machine or of the server (NTP)", fe)
		d.skip(checkRegion, "the request's time was refused")
		d.skip(checkBucket, "the request's time was refused")
		d.why = "the clocks disagree"
	case credentialCodes[r.code] || r.status == 403:
		fe := f()
		fe.Error = r.err.Error()
		hint := "check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or the profile)"
		switch r.code {
		case "InvalidAccessKeyId", "XAdminUserNotFound":
			hint = "the server does not know this access key: check AWS_ACCESS_KEY_ID (or the profile)"
		case "SignatureDoesNotMatch":
			hint = "the secret key does not match the access key: check AWS_SECRET_ACCESS_KEY (or the profile)"
		case "AccessDenied", "":
			hint = fmt.Sprintf("wrong access key or secret (check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or the profile), or the key may not list bucket %q under %s (Garage: garage bucket allow --read --write --key KEY %s)",
				o.Bucket, reservedPrefix(d.root), o.Bucket)
		}
		d.add(checkCredentials, statusFail, fmt.Sprintf("%s refused the credentials from %s (%d %s%s)", r.endpoint, credSource, r.status, r.code, server), hint, fe)
		d.skip(checkRegion, "the credentials were refused")
		d.skip(checkBucket, "the credentials were refused")
		d.why = "the credentials were refused"
	case r.code == "NoSuchBucket":
		okCreds()
		okRegion()
		fe := f()
		fe.Error = r.err.Error()
		d.add(checkBucket, statusFail, fmt.Sprintf("bucket %q does not exist on %s%s", o.Bucket, r.endpoint, server),
			fmt.Sprintf("create it (Garage: garage bucket create %s, then garage bucket allow --read --write --key KEY %s; AWS: aws s3 mb s3://%s), or fix the bucket in the URL", o.Bucket, o.Bucket, o.Bucket), fe)
		d.why = "the bucket does not exist"
	default:
		okCreds()
		okRegion()
		fe := f()
		fe.Error = r.err.Error()
		d.add(checkBucket, statusFail, fmt.Sprintf("listing %s failed: %s", reservedPrefix(d.root), cause(r.err)),
			"see the server's message; cairn-state --verbose ls shows the requests", fe)
		d.why = "the bucket cannot be listed"
	}
}

// checkConditionalWrites runs the conditional-write probe on S3 (it writes
// and removes a throwaway object under the reserved prefix) and says which
// lock mode the finding implies; on a directory there is nothing to probe.
func (d *doctor) checkConditionalWrites(ctx context.Context) {
	if !d.storage {
		for _, c := range []string{checkConditional, checkLockMode} {
			d.skip(c, d.why)
		}
		return
	}
	sb, ok := d.b.(*s3.Backend)
	if !ok {
		d.lockMode = lock.ModeClaims
		if d.b.Capabilities().ConditionalWrites {
			d.lockMode = lock.ModeCAS
		}
		d.add(checkConditional, statusOK, "the directory backend makes conditional writes atomic with flock(2) across processes (ADR 0002); nothing to probe", "", &facts{LockMode: string(d.lockMode)})
		d.add(checkLockMode, statusOK, lockModeText(d.lockMode, "the directory backend enforces put and delete conditions"), "", &facts{LockMode: string(d.lockMode)})
		return
	}
	mode := d.s3.opts.Conditional
	prefix := reservedPrefix(d.root)
	res, err := sb.Probe(ctx)
	if err != nil {
		fe := &facts{ProbePrefix: prefix, Conditional: string(mode), Error: err.Error()}
		var timeout interface{ Timeout() bool }
		switch {
		case errors.Is(err, backend.ErrPermission):
			d.add(checkConditional, statusWarn, fmt.Sprintf("the credentials may not write under %s: %s", prefix, cause(err)),
				"reads work (ls, get, lock status); writes (put, rm, rekey) and the application's lock need a key allowed to write there", fe)
		case errors.As(err, &timeout) && timeout.Timeout(), ctx.Err() != nil:
			d.add(checkConditional, statusFail, "the storage stopped answering during the probe: "+cause(err), "see the endpoint lines above; raise --timeout for a slow link", fe)
			d.storage, d.why = false, "the storage stopped answering"
		default:
			d.add(checkConditional, statusFail, "the probe failed: "+cause(err), "see the server's message", fe)
		}
		switch mode {
		case s3.ConditionalOn:
			d.lockMode = lock.ModeCAS
		case s3.ConditionalOff:
			d.lockMode = lock.ModeClaims
		}
		if d.lockMode == "" {
			d.skip(checkLockMode, "the probe did not finish")
		} else {
			d.add(checkLockMode, statusOK, lockModeText(d.lockMode, "conditional="+string(mode)+" in the URL"), "", &facts{LockMode: string(d.lockMode)})
		}
		return
	}
	fe := &facts{ProbePrefix: prefix, Conditional: string(mode), PutConditions: &res.PutConditions,
		DeleteConditions: &res.DeleteConditions, Evidence: res.Evidence}
	wrote := fmt.Sprintf(" (a probe object was written and removed under %s)", prefix)
	probed, why := res.LockMode()
	d.lockMode = lock.Mode(probed)
	if !res.Supported {
		why = "the server does not enforce the conditions"
	}
	switch mode {
	case s3.ConditionalOn:
		d.lockMode, why = lock.ModeCAS, "conditional=on in the URL"
	case s3.ConditionalOff:
		d.lockMode, why = lock.ModeClaims, "conditional=off in the URL"
	}
	switch {
	case mode == s3.ConditionalOn && !res.Supported:
		d.add(checkConditional, statusFail, "conditional=on in the URL, but the server does not enforce them: "+res.Evidence+wrote,
			"remove conditional=on (conditional=auto probes and chooses the claims lock): with it the compare-and-swap lock cannot keep a second instance out", fe)
	case mode == s3.ConditionalOff && res.Supported:
		d.add(checkConditional, statusOK, "enforced: "+res.Evidence+wrote+"; conditional=off in the URL makes the lock use claims anyway",
			"conditional=auto would use compare-and-swap", fe)
	case res.Supported:
		d.add(checkConditional, statusOK, "enforced: "+res.Evidence+wrote, "", fe)
	default:
		d.add(checkConditional, statusOK, "not enforced: "+res.Evidence+wrote, "", fe)
	}
	d.add(checkLockMode, statusOK, lockModeText(d.lockMode, why), "", &facts{LockMode: string(d.lockMode), Evidence: res.Evidence})
	if !res.Supported {
		d.add(checkListConsistency, statusWarn, "the claims lock assumes that a listing shows every write that completed before it (AWS S3, MinIO and versitygw do; Garage does in its default consistency_mode = \"consistent\"); doctor cannot read the server's configuration",
			"on Garage, keep consistency_mode = \"consistent\" (or leave it unset) in garage.toml: under \"degraded\" or \"dangerous\" two instances can both hold the lock", nil)
	}
}

// lockModeText describes a lock mode and why this configuration uses it.
func lockModeText(m lock.Mode, why string) string {
	if m == lock.ModeCAS {
		return "compare-and-swap: the lock is one object written with conditions (" + why + ")"
	}
	return "claims: each acquisition writes a claim and lists everybody's, no compare-and-swap needed (" + why + ")"
}

// checkClock compares the storage's clock (each answering endpoint's,
// with several) with this machine's.
func (d *doctor) checkClock(ctx context.Context) {
	if !d.storage {
		d.skip(checkClock, d.why)
		return
	}
	if d.s3 == nil {
		now, err := d.b.Now(ctx)
		if err != nil {
			d.add(checkClock, statusWarn, "could not read the directory backend's clock: "+err.Error(), "", nil)
			return
		}
		d.add(checkClock, statusOK, "the directory backend's clock is this machine's", "", &facts{StorageTime: now.UTC(), OffsetSeconds: seconds(0)})
		return
	}
	type reading struct {
		ep            string
		at, local     time.Time
		offset, halfR time.Duration
		err           error
	}
	readings := make([]reading, len(d.s3.answered))
	var wg sync.WaitGroup
	for i, ep := range d.s3.answered {
		wg.Go(func() {
			r := reading{ep: ep}
			one := d.s3.opts
			one.Endpoint = ""
			if ep != "aws" {
				one.Endpoint = ep
			}
			one.MaxAttempts, one.Conditional, one.Logger = 1, s3.ConditionalOff, d.a.logger
			b, err := s3.New(ctx, one)
			if err != nil {
				r.err = err
				readings[i] = r
				return
			}
			defer b.Close()
			t0 := time.Now()
			r.at, r.err = b.Now(ctx)
			t1 := time.Now()
			// The Date header is truncated to the second: the server's
			// clock was, on average, half a second past it.
			r.local = t0.Add(t1.Sub(t0) / 2)
			r.offset = r.at.Add(500 * time.Millisecond).Sub(r.local)
			r.halfR = 500*time.Millisecond + t1.Sub(t0)/2
			readings[i] = r
		})
	}
	wg.Wait()
	for _, r := range readings {
		f := &facts{Endpoint: r.ep}
		if r.err != nil {
			f.Error = r.err.Error()
			d.add(checkClock, statusWarn, fmt.Sprintf("could not read the clock of %s: %s", r.ep, cause(r.err)),
				"a key scoped to a prefix may be refused HeadBucket; the lock then judges ages from each response's Date", f)
			continue
		}
		f.StorageTime, f.LocalTime, f.OffsetSeconds, f.UncertaintySeconds = r.at.UTC(), r.local.UTC(), seconds(r.offset.Round(100*time.Millisecond)), seconds(r.halfR.Round(100*time.Millisecond))
		dir := "ahead of"
		if r.offset < 0 {
			dir = "behind"
		}
		off := r.offset.Abs().Round(100 * time.Millisecond)
		finding := fmt.Sprintf("the clock of %s is %s %s this machine's (±%s: S3 dates are whole seconds)", r.ep, off, dir, r.halfR.Round(100*time.Millisecond))
		if r.offset.Abs() < clockWarnAfter {
			d.add(checkClock, statusOK, finding, "", f)
			continue
		}
		d.add(checkClock, statusWarn, finding+"; the lock judges staleness on the storage's clock, so this is safe, but times shown here (heartbeat ages, modification times) are off",
			"synchronise the clocks (NTP) of this machine and the server; past 15 minutes S3 refuses the requests", f)
	}
}

// checkIdentities checks each configured identity file: it exists, only
// its owner may read it, and it parses. Its contents are never shown;
// the recipients (public) are.
func (d *doctor) checkIdentities() {
	if len(d.a.identities) == 0 {
		d.add(checkIdentity, statusWarn, "no identity configured: the storage was checked, not whether a key opens the store",
			"pass --identity FILE (or set CAIRN_STATE_IDENTITY) to check the key the application uses", nil)
		return
	}
	d.keysOK = true
	for _, path := range d.a.identities {
		f := &facts{File: path}
		fi, err := os.Stat(path)
		if err != nil {
			d.keysOK = false
			f.Error = err.Error()
			hint := "fix the path, or create a new identity with cairn-state keygen -o FILE (a new key cannot open an existing store)"
			if !errors.Is(err, os.ErrNotExist) {
				hint = "check the file's permissions"
			}
			d.add(checkIdentity, statusFail, fmt.Sprintf("%s: %v", path, errors.Unwrap(err)), hint, f)
			continue
		}
		f.Mode = fmt.Sprintf("%04o", fi.Mode().Perm())
		if mode, open := state.IdentityFileOpenToOthers(path); open {
			d.keysOK = false
			d.add(checkIdentity, statusFail, fmt.Sprintf("%s has mode %04o: a secret key must not be accessible by group or others, and the CLI refuses it", path, mode),
				"chmod 600 "+path, f)
			continue
		}
		ids, err := envelope.LoadIdentityFile(path)
		if err != nil {
			d.keysOK = false
			d.add(checkIdentity, statusFail, err.Error(),
				"give the file age-keygen or cairn-state keygen wrote, or an SSH private key", f)
			continue
		}
		for _, id := range ids {
			if r, err := envelope.RecipientOf(id); err == nil {
				if s, err := envelope.RecipientString(r); err == nil {
					f.Recipients = append(f.Recipients, s)
				}
			}
		}
		f.Identities = len(ids)
		d.keys = append(d.keys, ids...)
		n := "1 identity"
		if len(ids) != 1 {
			n = fmt.Sprintf("%d identities", len(ids))
		}
		finding := fmt.Sprintf("%s: %s, mode %s", path, n, f.Mode)
		if len(f.Recipients) > 0 {
			finding += ", recipient " + strings.Join(f.Recipients, ", ")
		}
		d.add(checkIdentity, statusOK, finding, "", f)
	}
}

// checkMembership tells whether the configured identities open the store:
// its identity record (.cairn-state/.store) when it has one, else the lock
// record or another object, named in the finding.
func (d *doctor) checkMembership(ctx context.Context) {
	switch {
	case !d.storage:
		d.skip(checkMembership, d.why)
		return
	case len(d.a.identities) == 0:
		d.skip(checkMembership, "no identity configured")
		return
	case !d.keysOK:
		d.skip(checkMembership, "an identity file did not load")
		return
	}
	// The store's manifest decides, as it does for every other command
	// (store.Connect, docs/adr/0021); a store without one (created before
	// manifests, or empty) is judged by one of its objects.
	st, err := store.Connect(ctx, d.b, store.Keys{Identities: d.keys}, &store.ConnectOptions{Options: store.Options{Root: d.root, Logger: d.a.logger}})
	manifestFacts := &facts{Object: store.Prefix + store.ManifestName}
	var notMember *store.NotMemberError
	switch {
	case errors.As(err, &notMember):
		manifestFacts.StoreID, manifestFacts.Error = notMember.StoreID.String(), notMember.Err.Error()
		d.add(checkMembership, statusFail, err.Error(),
			"pass the right one with --identity FILE (or CAIRN_STATE_IDENTITY); the other commands refuse this one with exit 5; a new store needs a URL of its own", manifestFacts)
		return
	case errors.Is(err, store.ErrBadManifest):
		manifestFacts.Error = err.Error()
		d.add(checkMembership, statusFail, err.Error(), "cairn-state verify; restore "+store.Prefix+store.ManifestName+" from a backup", manifestFacts)
		return
	case err != nil:
		d.storageError(checkMembership, "reading the store's manifest", err)
		return
	}
	if m, ok := st.Manifest(); ok {
		d.store = st
		manifestFacts.StoreID = m.ID.String()
		finding := fmt.Sprintf("the identity opens the store (store id %s, created %s, %s, key generation %d): read %s%s",
			m.ID, m.Created.UTC().Format(time.RFC3339), plural(len(m.Recipients), "recipient"), m.Generation, store.Prefix, store.ManifestName)
		if diff := st.RecipientDiff(); !diff.Empty() {
			d.add(checkMembership, statusWarn, finding+"; the configured recipients differ from the store's: "+diff.String(),
				"objects are sealed to the store's recipients; to change the store's set, run cairn-state rekey with the identities and recipients it should have", manifestFacts)
			return
		}
		d.add(checkMembership, statusOK, finding, "", manifestFacts)
		return
	}
	var names []store.Info
	err = st.Internal().List(ctx, "", func(i store.Info) error {
		names = append(names, i)
		return nil
	})
	if err != nil {
		d.storageError(checkMembership, "listing the store", err)
		return
	}
	name, why := pickObject(names)
	if name == "" {
		d.add(checkMembership, statusOK, "the store is empty: the first write seals its objects to the configured identities", "", nil)
		return
	}
	key := reservedPrefix(d.root) + name
	data, err := readObject(ctx, d.b, key)
	if err != nil {
		d.storageError(checkMembership, "reading "+name, err)
		return
	}
	f := &facts{Object: store.Prefix + name}
	hdr, err := envelope.PeekHeader(name, data)
	if err != nil {
		f.Error = err.Error()
		d.add(checkMembership, statusFail, fmt.Sprintf("%s%s is not a cairn-state object: %v", store.Prefix, name, err),
			"cairn-state verify lists every object that does not open; restore it from a backup", f)
		return
	}
	if !hdr.StoreID.IsZero() {
		f.StoreID = hdr.StoreID.String()
	}
	env, err := envelope.New(d.keys, nil, &envelope.Options{StoreID: hdr.StoreID, AcceptLegacy: true, Logger: d.a.logger})
	if err != nil {
		f.Error = err.Error()
		d.add(checkMembership, statusFail, "the identities cannot open objects: "+err.Error(), "", f)
		return
	}
	d.storeID = hdr.StoreID
	what := store.Prefix + name
	if why != "" {
		what += " (" + why + ")"
	}
	_, err = env.Open(name, data)
	switch {
	case err == nil:
		finding := "the identity opens the store: read " + what
		if !hdr.StoreID.IsZero() {
			finding = fmt.Sprintf("the identity opens the store (store id %s): read %s", hdr.StoreID, what)
		}
		d.add(checkMembership, statusOK, finding, "", f)
	case errors.Is(err, envelope.ErrNoIdentity):
		f.Error = err.Error()
		d.add(checkMembership, statusFail, "this identity does not belong to this store: "+what+" is sealed to other keys",
			"pass the identity the store is sealed to (--identity FILE, CAIRN_STATE_IDENTITY); the other commands refuse this one with exit 5; a new store needs a URL of its own", f)
	case errors.Is(err, envelope.ErrUnauthenticated):
		f.Error = err.Error()
		d.add(checkMembership, statusFail, what+" decrypts with this identity but no configured writer identity authenticates it: a recovery key that never wrote, or a forged object",
			"pass the writer identity the application uses; a recovery key reads only with get --allow-unauthenticated; cairn-state verify lists what is affected", f)
	default:
		f.Error = err.Error()
		d.add(checkMembership, statusFail, fmt.Sprintf("%s does not open: %v", what, err),
			"cairn-state verify lists every object that does not open and why", f)
	}
}

// pickObject chooses the object that tells whether a key opens a store
// without a manifest: the lock record (the lock object or a claim), else
// an application object, else any other sealed one (the smallest of its
// kind). It says why.
func pickObject(infos []store.Info) (name, why string) {
	rank := func(n string) int {
		switch {
		case n == ".lock", strings.HasPrefix(n, ".lock.d/claim-"):
			return 1 // the lock object, or a claim (claims mode)
		case !strings.HasPrefix(n, "."):
			return 2
		case strings.HasPrefix(n, ".lock.d/epoch-"):
			return -1 // epoch markers are not sealed
		}
		return 3
	}
	best, bestRank := store.Info{}, 99
	for _, i := range infos {
		r := rank(i.Name)
		if r < 0 || r > bestRank || r == bestRank && i.Size >= best.Size {
			continue
		}
		best, bestRank = i, r
	}
	switch bestRank {
	case 99:
		return "", ""
	case 1:
		return best.Name, "the lock record: this store has no " + store.Prefix + store.ManifestName + " yet"
	}
	return best.Name, "this store has no " + store.Prefix + store.ManifestName + " or lock record"
}

// readObject reads one object's stored bytes, refusing one larger than a
// store accepts.
func readObject(ctx context.Context, b backend.Backend, key string) ([]byte, error) {
	rc, obj, err := b.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if obj.Size > store.DefaultMaxObjectSize {
		return nil, fmt.Errorf("%s: %d bytes, more than a store accepts (%d)", key, obj.Size, store.DefaultMaxObjectSize)
	}
	data, err := io.ReadAll(io.LimitReader(rc, store.DefaultMaxObjectSize+1))
	if err != nil {
		return nil, err
	}
	return data, nil
}

// storageError reports a storage request that failed in a later check;
// one that got no answer ends the storage checks.
func (d *doctor) storageError(name, what string, err error) {
	var timeout interface{ Timeout() bool }
	if errors.As(err, &timeout) && timeout.Timeout() || errors.Is(err, context.DeadlineExceeded) {
		d.storage, d.why = false, "the storage stopped answering"
		d.add(name, statusFail, fmt.Sprintf("%s: the storage stopped answering: %s", what, cause(err)),
			fmt.Sprintf("see the endpoint lines above; doctor gives the storage --timeout %s in all", d.a.timeout), &facts{Error: err.Error()})
		return
	}
	d.add(name, statusFail, fmt.Sprintf("%s: %s", what, cause(err)), "", &facts{Error: err.Error()})
}

// checkLock shows the lock holder as the lock's rules judge it.
func (d *doctor) checkLock(ctx context.Context) {
	if !d.storage {
		d.skip(checkLock, d.why)
		return
	}
	st := d.store // connected through its manifest, when it has one
	if st == nil {
		opts := store.Options{Root: d.root, Logger: d.a.logger}
		var err error
		if d.keysOK && len(d.keys) > 0 {
			// A store without a manifest: its lock opens with the id its
			// objects carry.
			var env *envelope.Envelope
			if env, err = envelope.New(d.keys, nil, &envelope.Options{StoreID: d.storeID, AcceptLegacy: true, Logger: d.a.logger}); err == nil {
				st, err = store.Open(d.b, env, opts)
			}
		}
		if st == nil {
			// Keyless: the lock is seen, not read.
			st, err = store.Connect(ctx, d.b, store.Keys{}, &store.ConnectOptions{Options: opts})
		}
		if err != nil {
			d.add(checkLock, statusFail, err.Error(), "", nil)
			return
		}
	}
	s, err := lock.Inspect(ctx, st, &lock.InspectOptions{StaleAfter: d.a.staleAfter})
	if err != nil {
		d.storageError(checkLock, "reading the lock", err)
		return
	}
	f := &facts{Present: &s.Present, Liveness: string(s.Liveness), NextBoot: s.NextBoot, Epoch: &s.Epoch,
		LockMode: string(s.Mode), Object: s.Object, Contenders: len(s.Contenders)}
	if s.Present {
		f.HeartbeatAgeSeconds, f.StaleInSeconds = seconds(s.HeartbeatAge), seconds(s.StaleIn)
	}
	if s.Readable {
		h := holderOf(s.Record)
		f.Holder = &h
	}
	live := 0
	for _, c := range s.Contenders {
		if c.Live && c.State == lock.StateHeld {
			live++
		}
	}
	status, finding, hint := statusOK, "", ""
	switch {
	case !s.Present:
		finding = fmt.Sprintf("not held; the next acquisition takes it at once, at epoch %d", s.Epoch+1)
	case !s.Readable && !d.keysOK:
		finding = fmt.Sprintf("present (%s, last written %s ago, stale after %s); its holder cannot be read without a usable identity", s.Liveness, ago(s.HeartbeatAge), s.StaleAfter)
		if s.Stale {
			status, hint = statusWarn, "the next boot takes it over with a warning; pass --identity FILE to see who held it"
		}
	case !s.Readable:
		status = statusWarn
		finding = fmt.Sprintf("present but it does not open with the configured identities (%s, last written %s ago, stale after %s): %s", s.Liveness, ago(s.HeartbeatAge), s.StaleAfter, s.Unreadable)
		hint = "an instance with another key is using this store, or the lock is damaged: the next boot would " + s.NextBoot + "; cairn-state lock break --force removes it once its holder is gone for good"
	default:
		r := s.Record
		who := fmt.Sprintf("%q (pid %d on %s)", r.InstanceID, r.PID, r.Hostname)
		finding = fmt.Sprintf("held by %s, %s, heartbeat %s ago, mode %s, epoch %d", who, s.Liveness, ago(s.HeartbeatAge), s.Mode, r.Epoch)
		switch s.Liveness {
		case lock.Live:
			hint = "writes from here (put, rm, rekey) wait for it (--wait) or are refused with exit 3; reads work"
		case lock.Dead:
			status = statusWarn
			hint = "its process is gone from this host: the next boot or write takes it over at once"
		default:
			status = statusWarn
			hint = "the next boot would " + s.NextBoot + "; cairn-state lock break removes a stale lock"
		}
		if d.lockMode != "" && s.Mode != d.lockMode {
			status = statusWarn
			hint = fmt.Sprintf("its holder uses the %s protocol but this configuration would use %s: give the application and the CLI the same conditional= in the URL; ", s.Mode, d.lockMode) + hint
		}
	}
	if live > 0 {
		status = statusWarn
		finding += fmt.Sprintf("; %s also held and live", plural(live, "other claim"))
		hint = "two instances may share one instance id, or the storage's listings are not consistent (Garage: consistency_mode); cairn-state lock status lists them"
	}
	d.add(checkLock, status, finding, hint, f)
}
