package main

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/cairnhq/state/internal/s3diag"
)

// endpointFacts are an endpoint line's.
type endpointFacts struct {
	Endpoint       string   `json:"endpoint,omitempty"`
	ConnectSeconds *float64 `json:"connect_seconds,omitempty"`
	AnswerSeconds  *float64 `json:"answer_seconds,omitempty"`
	HTTPStatus     int      `json:"http_status,omitempty"`
	ErrorCode      string   `json:"error_code,omitempty"`
	Error          string   `json:"error,omitempty"`
}

// accessFacts are the credentials, region and bucket lines': the answer
// they were judged from.
type accessFacts struct {
	Bucket            string `json:"bucket,omitempty"`
	Region            string `json:"region,omitempty"`
	Endpoint          string `json:"endpoint,omitempty"`
	HTTPStatus        int    `json:"http_status,omitempty"`
	ErrorCode         string `json:"error_code,omitempty"`
	Error             string `json:"error,omitempty"`
	CredentialsSource string `json:"credentials_source,omitempty"`
}

// checkS3 reports the S3 backend's diagnosis: a line per endpoint, then
// the credentials, the region and the bucket, the conditional writes and
// the lock mode they imply, and each endpoint's clock.
func (d *doctor) checkS3(diag s3diag.Diagnosis) {
	another := slices.ContainsFunc(diag.Endpoints, s3diag.EndpointCheck.OK)
	for _, e := range diag.Endpoints {
		d.endpointLine(e, another)
	}
	switch {
	case diag.CredentialsErr != nil:
		d.add(checkCredentials, statusFail, "no credentials found in the AWS chain: "+diag.CredentialsErr.Error(),
			"set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) for the key the server gave you; credentials never go in the URL", nil)
		d.why = "no credentials"
		d.skipAll(d.why, checkRegion, checkBucket)
	case diag.Answer == nil:
		d.why = "no endpoint answered"
		d.skipAll(d.why, checkCredentials, checkRegion, checkBucket)
	default:
		d.judgeAccess(diag)
	}
	d.checkConditionalWrites(diag.Probe)
	d.checkClocks(diag.Clocks)
}

// endpointLine reports one endpoint. A failing endpoint is a warning when
// another answers (requests fail over to it), else a failure.
func (d *doctor) endpointLine(r s3diag.EndpointCheck, another bool) {
	f := &endpointFacts{Endpoint: r.Endpoint}
	bad := statusFail
	also := ""
	if another && len(d.s3.endpoints) > 1 {
		bad, also = statusWarn, "; requests fail over to the other endpoints meanwhile"
	}
	if r.ConnectErr != nil {
		f.Error = r.ConnectErr.Error()
		var dnsErr *net.DNSError
		var finding, hint string
		switch {
		case errors.As(r.ConnectErr, &dnsErr):
			finding = fmt.Sprintf("%s: cannot resolve the host name: %v", r.Endpoint, dnsErr)
			hint = "check the host in endpoint= (and this machine's DNS)"
		case strings.Contains(r.ConnectErr.Error(), "connection refused"):
			finding = fmt.Sprintf("%s refused the connection: nothing listens there", r.Endpoint)
			hint = "start the server, or fix the host and port in endpoint="
		case strings.Contains(r.ConnectErr.Error(), "connect timeout"):
			finding = fmt.Sprintf("%s: %v", r.Endpoint, r.ConnectErr)
			hint = "the host is down, or a firewall drops the connection: check the address and port in endpoint="
		default:
			finding = fmt.Sprintf("%s: cannot connect: %v", r.Endpoint, r.ConnectErr)
			hint = "check the server and endpoint= in the URL"
		}
		d.add(checkEndpoint, bad, finding, hint+also, f)
		return
	}
	connected := "aws (the SDK resolves the endpoint)"
	if r.Endpoint != "aws" {
		f.ConnectSeconds = seconds(r.Connect)
		connected = fmt.Sprintf("%s accepted a connection in %s", r.Endpoint, short(r.Connect))
	}
	switch {
	case !r.Sent:
		d.add(checkEndpoint, statusOK, connected+"; no request sent (no credentials)", "", f)
	case r.Status == 0:
		f.Error = r.Err.Error()
		d.add(checkEndpoint, bad, fmt.Sprintf("%s but did not answer a request: %s", connected, cause(r.Err)),
			"the server, or a proxy in front of it, is hung or is not an S3 server: restart it, or fix endpoint="+also, f)
	case r.Status >= 500:
		f.HTTPStatus, f.ErrorCode, f.Error = r.Status, r.Code, r.Err.Error()
		d.add(checkEndpoint, bad, fmt.Sprintf("%s but answered %d %s: %s", connected, r.Status, r.Code, r.Message),
			"the server is up but failing: look at its log (Garage: a node without its layout, or without quorum, answers 5xx)"+also, f)
	default:
		f.HTTPStatus, f.ErrorCode, f.AnswerSeconds = r.Status, r.Code, seconds(r.Took)
		what := fmt.Sprintf("HTTP %d", r.Status)
		if r.Code != "" {
			what += " " + r.Code
		}
		d.add(checkEndpoint, statusOK, fmt.Sprintf("%s and answered a signed request in %s (%s)", connected, short(r.Took), what), "", f)
	}
}

// judgeAccess reports the credentials, region and bucket lines from the
// refusal (or not) of the first endpoint that answered.
func (d *doctor) judgeAccess(diag s3diag.Diagnosis) {
	r, o, prefix := diag.Answer, d.s3.opts, reservedPrefix(d.root)
	region := fmt.Sprintf("%q", diag.Region)
	if o.Region == "" {
		region += " (from the AWS configuration: the URL sets no region=)"
	}
	f := func() *accessFacts {
		return &accessFacts{Endpoint: r.Endpoint, HTTPStatus: r.Status, ErrorCode: r.Code, CredentialsSource: diag.CredentialsSource, Region: diag.Region, Bucket: o.Bucket}
	}
	failed := func() *accessFacts { // the line that failed quotes the error
		fe := f()
		fe.Error = r.Err.Error()
		return fe
	}
	server := ""
	if r.Message != "" {
		server = ": " + r.Message
	}
	okCredentials := func() {
		d.add(checkCredentials, statusOK, fmt.Sprintf("accepted by %s (from %s)", r.Endpoint, diag.CredentialsSource), "", f())
		d.add(checkRegion, statusOK, region+" accepted", "", f())
	}
	switch diag.Refusal {
	case "":
		okCredentials()
		d.add(checkBucket, statusOK, fmt.Sprintf("%q exists and lists under %s", o.Bucket, prefix), "", f())
		d.storage = true
	case "region":
		d.skip(checkCredentials, "the server refused the signing region first")
		d.add(checkRegion, statusFail, fmt.Sprintf("%s refused region %s (%d %s%s)", r.Endpoint, region, r.Status, r.Code, server),
			"set region= in the URL to the server's region (Garage: its s3_region, often \"garage\"; AWS: the bucket's region)", failed())
		d.skip(checkBucket, "the region is wrong")
		d.why = "the region is wrong"
	case "time":
		d.add(checkCredentials, statusFail, fmt.Sprintf("%s refused the request's time (%d %s%s): this machine's clock and the server's differ by more than S3 allows (15 minutes)", r.Endpoint, r.Status, r.Code, server),
			"fix the clock of this machine or of the server (NTP)", failed())
		d.skipAll("the request's time was refused", checkRegion, checkBucket)
		d.why = "the clocks disagree"
	case "access-key", "secret", "denied", "credentials":
		d.add(checkCredentials, statusFail, fmt.Sprintf("%s refused the credentials from %s (%d %s%s)", r.Endpoint, diag.CredentialsSource, r.Status, r.Code, server),
			credentialsHint(diag.Refusal, o.Bucket, prefix), failed())
		d.skipAll("the credentials were refused", checkRegion, checkBucket)
		d.why = "the credentials were refused"
	case "bucket":
		okCredentials()
		d.add(checkBucket, statusFail, fmt.Sprintf("bucket %q does not exist on %s%s", o.Bucket, r.Endpoint, server),
			fmt.Sprintf("create it (Garage: garage bucket create %s, then garage bucket allow --read --write --key KEY %s; AWS: aws s3 mb s3://%s), or fix the bucket in the URL", o.Bucket, o.Bucket, o.Bucket), failed())
		d.why = "the bucket does not exist"
	default:
		okCredentials()
		d.add(checkBucket, statusFail, fmt.Sprintf("listing %s failed: %s", prefix, cause(r.Err)),
			"see the server's message; cairn-state --verbose ls shows the requests", failed())
		d.why = "the bucket cannot be listed"
	}
}

// credentialsHint says what to check for a refusal of the credentials.
func credentialsHint(r string, bucket, prefix string) string {
	switch r {
	case "access-key":
		return "the server does not know this access key: check AWS_ACCESS_KEY_ID (or the profile)"
	case "secret":
		return "the secret key does not match the access key: check AWS_SECRET_ACCESS_KEY (or the profile)"
	case "denied":
		return fmt.Sprintf("wrong access key or secret (check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or the profile), or the key may not list bucket %q under %s (Garage: garage bucket allow --read --write --key KEY %s)",
			bucket, prefix, bucket)
	}
	return "check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or the profile)"
}
