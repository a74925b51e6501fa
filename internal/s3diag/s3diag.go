// Package s3diag holds what the S3 backend's probes and diagnosis find
// (docs/adr/0048): the results `cairn-state doctor` words and the backend
// keeps, the [Backend] interface through which cairn-state's own packages
// run them on the backend package s3 makes, and the defaults of its
// timeouts (docs/adr/0052, 0062).
package s3diag

import (
	"context"
	"time"
)

// Diagnosis is what [Backend.Diagnose] found, step by step. A step that
// did not run because an earlier one failed is left nil.
type Diagnosis struct {
	// Region is the signing region in force: Options.Region, else the
	// AWS configuration's, else "us-east-1".
	Region string
	// CredentialsSource names where the credentials came from, as the
	// SDK names it ("EnvConfigCredentials", "StaticCredentials", …).
	CredentialsSource string
	// CredentialsErr is why no credentials were found; nil when they
	// were. Without credentials no request is sent: the endpoints are
	// only connected to, and the steps after them do not run.
	CredentialsErr error
	// Endpoints are the checks of the backend's endpoints, in the order
	// of the URL's endpoint list.
	Endpoints []EndpointCheck
	// Answer is the first of Endpoints that answered the signed listing
	// ([EndpointCheck.OK]); nil when none did or no request was sent.
	Answer *EndpointCheck
	// Refusal is what Answer refused, told apart by its S3 error code, in
	// this order (a wrong region is reported before the credentials it
	// was signed with are even looked at); "" when the listing succeeded,
	// and the probe runs only then:
	//   - "region": the server expects another signing region
	//     (AuthorizationHeaderMalformed, PermanentRedirect,
	//     AuthorizationQueryParametersError,
	//     IllegalLocationConstraintException, InvalidRegion);
	//   - "time": the request's time is too far from the server's clock
	//     (RequestTimeTooSkewed: more than 15 minutes);
	//   - "access-key": the server does not know the access key
	//     (InvalidAccessKeyId; versitygw's XAdminUserNotFound);
	//   - "secret": the secret key does not match the access key
	//     (SignatureDoesNotMatch);
	//   - "denied": AccessDenied, or a 403 without a code: a wrong key or
	//     secret (Garage answers so for both), or a key not allowed to
	//     list the bucket under the prefix;
	//   - "credentials": another refusal of the credentials (a session
	//     token's errors, a 403 with another code);
	//   - "bucket": the bucket does not exist (NoSuchBucket);
	//   - "listing": any other refusal; see the answer's Err.
	Refusal string
	// Probe is the conditional-write probe's outcome; nil when it did not
	// run.
	Probe *ProbeCheck
	// Clocks are the storage clocks of the endpoints that are OK, in
	// their order; nil when the probe did not run or the storage stopped
	// answering during it.
	Clocks []ClockReading
}

// EndpointCheck is what one endpoint did with a TCP connection and one
// signed request.
type EndpointCheck struct {
	// Endpoint is the base URL; "aws" when the SDK resolves AWS's
	// endpoint (it is then not connected to first).
	Endpoint string
	// Connect is how long the TCP connection took to be accepted.
	Connect time.Duration
	// ConnectErr is why no connection was accepted within the connect
	// timeout: a *net.DNSError, a refusal, or a timeout (an error whose
	// Timeout method reports true, naming the timeout). Nothing was sent.
	ConnectErr error
	// Sent is true when the signed listing was sent: credentials were
	// found and the connection was accepted.
	Sent bool
	// Status is the HTTP status of the answer, 200 when the listing
	// succeeded; 0 when no answer came (Err says why: a timeout names the
	// timeout that fired).
	Status int
	// Code and Message are the S3 error code and the server's message of
	// an answer that refused the listing.
	Code, Message string
	// Err is the listing's error, as the backend reports errors (it
	// names the endpoint when no answer came); nil when it succeeded.
	Err error
	// Took is the listing's time, from sending it to its answer.
	Took time.Duration
}

// OK reports whether the endpoint is usable: it accepted a connection
// and, when it was asked, answered below 500.
func (e EndpointCheck) OK() bool {
	return e.ConnectErr == nil && (!e.Sent || e.Status != 0 && e.Status < 500)
}

// ProbeCheck is what the conditional-write probe found, and the lock
// mode this backend's configuration implies.
type ProbeCheck struct {
	// Result is the probe's finding, when Err is nil.
	Result ProbeResult
	// Err is why the probe failed; it matches backend.ErrPermission when
	// the credentials may not write under the probe prefix.
	Err error
	// Unanswered is true when the storage stopped answering during the
	// probe (a timeout, or the context ended): Diagnose then reads no
	// clocks.
	Unanswered bool
	// LockMode is the lock mode the configuration implies,
	// "compare-and-swap" or "claims": the one ConditionalOn or
	// ConditionalOff forces, else the probe's finding; empty when the
	// probe failed under ConditionalAuto.
	LockMode string
	// LockModeWhy says what LockMode was decided from.
	LockModeWhy string
}

// ClockReading is one endpoint's clock against this machine's.
type ClockReading struct {
	// Endpoint is the endpoint read, as in [EndpointCheck].
	Endpoint string
	// Storage is the Date header of the endpoint's answer to a
	// HeadBucket: whole seconds.
	Storage time.Time
	// Local is this machine's clock halfway through the request.
	Local time.Time
	// Offset is how far the storage's clock is ahead of this machine's
	// (negative: behind), the Date taken as half a second past the second
	// it was truncated to.
	Offset time.Duration
	// Uncertainty bounds Offset's error: half a second for the Date's
	// truncation plus half the round trip.
	Uncertainty time.Duration
	// Err is why the clock could not be read (a key scoped to a prefix
	// may be refused HeadBucket); the other fields are then zero.
	Err error
}

// ProbeResult is what a conditional-write probe found.
type ProbeResult struct {
	// Supported is true when every condition was enforced: the backend
	// then reports conditional writes.
	Supported bool
	// PutConditions is true when PutObject enforced If-None-Match: * and
	// If-Match (a false condition failed with 412 and wrote nothing, a
	// true one succeeded).
	PutConditions bool
	// DeleteConditions is true when DeleteObject enforced If-Match.
	DeleteConditions bool
	// Evidence says, in a sentence per finding, what the server did: for
	// each condition it ignored or refused, how.
	Evidence string
}

// LockMode names the lock mode a probe's finding implies, with the reason,
// for the log and for operators: "compare-and-swap" when every condition is
// enforced, else "claims" (the lock's protocol for storage without
// compare-and-swap).
func (r ProbeResult) LockMode() (mode, why string) {
	if r.Supported {
		return "compare-and-swap", "put and delete conditions enforced"
	}
	return "claims", r.Evidence
}

// CopyProbeResult is what a copy-condition probe found.
type CopyProbeResult struct {
	// SourceConditions is true when CopyObject enforced
	// x-amz-copy-source-if-match: a copy of a version the source no
	// longer has failed with 412 and wrote nothing, a copy of the one it
	// has succeeded.
	SourceConditions bool
	// DestinationConditions is true when CopyObject enforced
	// If-None-Match: * on its destination, both ways.
	DestinationConditions bool
	// Evidence says, in a sentence per finding, what the server did.
	Evidence string
}

// Backend is the S3 backend (what package s3's New returns) as
// cairn-state's own packages see it: its probes and diagnosis, found by
// type assertion. An application never needs them (docs/adr/0062).
type Backend interface {
	// Diagnose checks, for an operator's tool, each part of the way to
	// the store and tells apart what is wrong: the credentials, each
	// endpoint (connected to, then sent one signed listing), the refusal
	// of the first that answered, the conditional-write probe, the
	// storage's clocks. It reports every finding in the Diagnosis and
	// fails with no error of its own.
	Diagnose(ctx context.Context) Diagnosis
	// Probe checks, on a throwaway object, that the server enforces
	// every condition the backend relies on, in both directions
	// (PutObject's If-None-Match and If-Match, DeleteObject's If-Match),
	// without changing the backend's capabilities. Transport, permission
	// and bucket errors fail the probe.
	Probe(ctx context.Context) (ProbeResult, error)
	// ProbeCopy checks, on throwaway objects below the probe prefix,
	// which conditions of CopyObject the server enforces, each in both
	// directions, without changing the backend's capabilities.
	ProbeCopy(ctx context.Context) (CopyProbeResult, error)
	// CurrentEndpoint returns the endpoint requests go to now: the first
	// one, or the one the last failover moved to.
	CurrentEndpoint() string
}

// The defaults of the S3 backend's timeouts and retries (s3.Options, the
// URL's parameters; ADR 0016), which the CLI's --timeout derives from and
// doctor reports.
const (
	DefaultConnectTimeout  = 5 * time.Second  // Options.ConnectTimeout, URL connect_timeout
	DefaultResponseTimeout = 8 * time.Second  // Options.ResponseTimeout, URL response_timeout
	DefaultAttemptTimeout  = 60 * time.Second // Options.AttemptTimeout, URL attempt_timeout
	DefaultMaxAttempts     = 3                // Options.MaxAttempts, URL max_attempts
	DefaultMaxBackoff      = time.Second      // Options.MaxBackoff, URL max_backoff
)
