package main

import (
	"time"

	"github.com/cairnhq/state/backend/s3"
	"github.com/cairnhq/state/internal/s3diag"
)

// defaultTimeout is the --timeout of a command: the longest it waits on
// storage that does not answer (issue 16: at most 30 s by default).
const defaultTimeout = 30 * time.Second

// minTimeout is the smallest --timeout accepted: below it, the derived
// per-attempt timeouts would be shorter than a healthy server's answer.
const minTimeout = time.Second

// operationShare is the part of --timeout one S3 operation that gets no
// answer may use, all its attempts and backoffs included. The clean-up
// that can follow a failed write (removing the conditional-write probe's
// object, releasing the lock) is another operation of the same bound, so
// a command on storage that stops answering ends within the budget, with
// a tenth of it to spare for the process itself (ADR 0025).
const operationShare = 0.45

// s3Budget returns the setup.BackendOptions.S3 hook that derives, from a
// command's budget, each S3 timeout the URL leaves unset: the connect and
// response timeouts (per attempt) and the backoff between attempts, so
// that an operation against an endpoint that accepts and never answers,
// or never accepts, fails within operationShare of the budget, naming the
// endpoint, the step and the limit. What the URL sets is kept as it is:
// the URL is the configuration the application uses too. AttemptTimeout
// is not derived: it caps a transfer that is making progress (a large
// put on a slow link), which a budget for silence must not cut.
func s3Budget(budget time.Duration) func(*s3.Options) {
	return func(o *s3.Options) {
		t := s3Timeouts(budget, o.Endpoint, o.MaxAttempts, o.MaxBackoff)
		if o.ConnectTimeout == 0 {
			o.ConnectTimeout = t.connect
		}
		if o.ResponseTimeout == 0 {
			o.ResponseTimeout = t.response
		}
		if o.MaxBackoff == 0 {
			o.MaxBackoff = t.backoff
		}
	}
}

// derivedTimeouts are the S3 timeouts a budget implies.
type derivedTimeouts struct {
	connect, response, backoff time.Duration
	attempts                   int
}

// s3Timeouts derives the per-attempt timeouts for budget on the endpoints
// of endpoint (s3.Options.Endpoint), given the URL's max_attempts and
// max_backoff (zero: unset). An operation makes max(attempts, endpoints)
// attempts, with at most one backoff between two of them; each attempt
// gets an equal share of what is left.
func s3Timeouts(budget time.Duration, endpoint string, maxAttempts int, maxBackoff time.Duration) derivedTimeouts {
	eps, _ := s3.ParseEndpoints(endpoint) // already checked by the URL parser
	attempts := maxAttempts
	if attempts == 0 {
		attempts = s3diag.DefaultMaxAttempts
	}
	n := max(attempts, len(eps), 1)
	backoff := maxBackoff
	if backoff == 0 {
		backoff = min(s3diag.DefaultMaxBackoff, budget/30)
	}
	op := time.Duration(float64(budget) * operationShare)
	per := (op - time.Duration(n-1)*backoff) / time.Duration(n)
	// Round down, so that messages read "3.8s" or "380ms"; a URL whose
	// own max_backoff eats the budget still gets a usable attempt (the
	// URL's values are the user's to fix).
	if per >= time.Second {
		per = per.Truncate(100 * time.Millisecond)
	} else {
		per = max(per.Truncate(10*time.Millisecond), 100*time.Millisecond)
	}
	return derivedTimeouts{connect: per, response: per, backoff: backoff, attempts: n}
}
