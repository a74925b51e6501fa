package s3

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// firstBackoff is the wait before the first retry on the same endpoint; it
// doubles at each further retry, up to Options.MaxBackoff.
const firstBackoff = 100 * time.Millisecond

// verdict is what an attempt's error calls for.
type verdict int

const (
	// final: the answer stands (access denied, no such key, a failed
	// condition…) or the caller's context is done.
	final verdict = iota
	// again: the same endpoint may answer better after a wait (429,
	// 409 ConditionalRequestConflict, 408).
	again
	// elsewhere: this endpoint did not answer (no connection, a timeout, a
	// torn response) or answered 5xx; another endpoint may, or this one
	// after a wait.
	elsewhere
)

// judge sorts the error of one attempt.
func judge(ctx context.Context, err error) verdict {
	if ctx.Err() != nil {
		return final
	}
	var te *timeoutError
	var de *smithy.DeserializationError
	var se *smithyhttp.RequestSendError
	switch {
	case errors.As(err, &te), errors.As(err, &de), errors.As(err, &se):
		return elsewhere
	}
	code, status := errorCode(err)
	switch {
	case code == "ConditionalRequestConflict", code == "SlowDown", code == "RequestTimeout",
		status == 429, status == 408:
		return again
	case status == 501:
		// NotImplemented: the server refuses the request as it stands
		// (a conditional header it does not know); asking again or
		// elsewhere in the same cluster gets the same answer.
		return final
	case status >= 500:
		return elsewhere
	}
	return final
}

// call sends one operation with the backend's retries and failover: send
// is called with an option that directs the request to the endpoint in use
// and returns the SDK's error. No attempt starts once ctx is done, and none
// after ctx's deadline would cut the wait before it short. The error
// returned is mapped (mapErr) and says how many attempts were made.
func (b *s3Backend) call(ctx context.Context, op, key string, conditional bool, send func(ctx context.Context, endpoint func(*s3.Options)) error) error {
	attempts := max(b.retry.maxAttempts, len(b.eps.urls))
	waits := 0
	var (
		err  error
		last int
		n    int
	)
	for n = 1; ; n++ {
		var endpoint func(*s3.Options)
		last, endpoint = b.eps.get()
		if err = send(ctx, endpoint); err == nil {
			return nil
		}
		v := judge(ctx, err)
		if v == final || n >= attempts {
			break
		}
		if v == elsewhere && b.eps.failover(ctx, last, op, err) {
			continue // another endpoint: no reason to wait
		}
		wait := b.retry.backoff(waits)
		waits++
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= wait {
			break // a retry could not complete before the deadline
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		if ctx.Err() != nil {
			break
		}
	}
	return b.settle(ctx, op, key, conditional, last, n, err)
}

// settle reports err, the error of an operation's last attempt (the n-th),
// made on endpoint i: one that got no answer names the endpoint, one that
// stood after retries says how many, and either is mapped (mapErr).
func (b *s3Backend) settle(ctx context.Context, op, key string, conditional bool, i, n int, err error) error {
	if judge(ctx, err) == elsewhere {
		err = &noAnswerError{endpoint: b.eps.name(i), attempts: n, err: err}
	} else if n > 1 {
		err = &attemptsError{endpoint: b.eps.name(i), attempts: n, err: err}
	}
	return b.mapErr(ctx, op, key, conditional, err)
}

// retryPolicy is the retry part of Options, defaults applied.
type retryPolicy struct {
	maxAttempts int
	maxBackoff  time.Duration
}

// backoff returns the wait before retry number i (from 0) on one
// endpoint: 100 ms doubling, capped, with its upper half jittered.
func (p retryPolicy) backoff(i int) time.Duration {
	d := p.maxBackoff
	if i < 30 {
		d = min(d, firstBackoff<<i)
	}
	return d/2 + rand.N(d/2+1)
}

// noAnswerError is an operation whose last attempt got no usable answer:
// no connection, a timeout, or a 5xx. Its message names the endpoint and
// the cause without the SDK's layers; errors.As still reaches them.
type noAnswerError struct {
	endpoint string
	attempts int
	err      error
}

func (e *noAnswerError) Error() string {
	tries := "1 attempt"
	if e.attempts > 1 {
		tries = fmt.Sprintf("%d attempts", e.attempts)
	}
	if _, status := errorCode(e.err); status >= 500 {
		return fmt.Sprintf("%s answered %d after %s: %v", e.endpoint, status, tries, e.err)
	}
	return fmt.Sprintf("no answer from %s after %s: %s", e.endpoint, tries, rootCause(e.err))
}

func (e *noAnswerError) Unwrap() error { return e.err }

// Timeout reports whether the last attempt timed out.
func (e *noAnswerError) Timeout() bool {
	var te *timeoutError
	return errors.As(e.err, &te)
}

// attemptsError is an answer that stood after retries (say a 409 that kept
// coming back).
type attemptsError struct {
	endpoint string
	attempts int
	err      error
}

func (e *attemptsError) Error() string {
	return fmt.Sprintf("%v (%d attempts, the last on %s)", e.err, e.attempts, e.endpoint)
}

func (e *attemptsError) Unwrap() error { return e.err }

// rootCause is the part of a transport error a reader needs: the timeout
// that fired, or the network error ("connect: connection refused"), or
// else the error itself.
func rootCause(err error) string {
	var te *timeoutError
	if errors.As(err, &te) {
		return te.Error()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		var oe *net.OpError
		if errors.As(ue.Err, &oe) {
			return oe.Error()
		}
		return strings.TrimSpace(ue.Err.Error())
	}
	return err.Error()
}
