package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// timeoutError is an attempt given up because the server took too long at
// one step of the exchange. It names the server, the step and the limit;
// Timeout reports true, like a net.Error's.
type timeoutError struct {
	host  string        // the server's host:port
	step  string        // what it failed to do: "sent no response headers within"
	limit time.Duration // the timeout that fired
	name  string        // the option that sets it
}

func (e *timeoutError) Error() string {
	return fmt.Sprintf("%s %s %v (%s)", e.host, e.step, e.limit, e.name)
}

// Timeout reports that the error is a timeout.
func (e *timeoutError) Timeout() bool { return true }

// timedClient applies the backend's connect, response and attempt timeouts
// to every request of the HTTP client it wraps. It watches each exchange
// through net/http/httptrace, so it works on any client built on
// net/http's Transport, including one the caller provides; a timeout
// cancels the request with a *timeoutError as the cause, and Do returns
// that error.
type timedClient struct {
	next                              aws.HTTPClient
	connect, response, attemptTimeout time.Duration
}

// Do sends req under the timeouts. On success the response body is
// watched too: each read must make progress within the response timeout.
func (c *timedClient) Do(req *http.Request) (*http.Response, error) {
	parent := req.Context()
	ctx, cancel := context.WithCancelCause(parent)
	w := &watchdog{cancel: cancel, host: req.URL.Host}
	attempt := time.AfterFunc(c.attemptTimeout, func() {
		cancel(&timeoutError{host: req.URL.Host, step: "did not answer the request within", limit: c.attemptTimeout, name: "attempt timeout"})
	})
	trace := &httptrace.ClientTrace{
		GetConn: func(string) { w.arm("did not accept a connection within", c.connect, "connect timeout") },
		GotConn: func(httptrace.GotConnInfo) { w.disarm() },
		WroteHeaders: func() {
			w.arm("stopped taking the request for", c.response, "response timeout")
		},
		WroteRequest: func(httptrace.WroteRequestInfo) {
			w.arm("sent no response headers within", c.response, "response timeout")
		},
		GotFirstResponseByte: w.disarm,
	}
	req = req.WithContext(httptrace.WithClientTrace(ctx, trace))
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = &progressBody{ReadCloser: req.Body, w: w, limit: c.response}
	}
	resp, err := c.next.Do(req)
	attempt.Stop()
	w.disarm()
	if err != nil {
		cause := context.Cause(ctx)
		cancel(nil)
		var te *timeoutError
		if errors.As(cause, &te) && parent.Err() == nil {
			return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Redacted(), te)
		}
		return nil, err
	}
	resp.Body = &watchedBody{ReadCloser: resp.Body, w: w, ctx: ctx, limit: c.response}
	return resp, nil
}

// watchdog cancels an exchange when the step it is armed for takes longer
// than its limit. Trace hooks and body reads arm and disarm it from the
// transport's goroutines.
type watchdog struct {
	cancel context.CancelCauseFunc
	host   string

	mu    sync.Mutex
	timer *time.Timer
}

func (w *watchdog) arm(step string, limit time.Duration, name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
	}
	w.timer = time.AfterFunc(limit, func() {
		w.cancel(&timeoutError{host: w.host, step: step, limit: limit, name: name})
	})
}

func (w *watchdog) disarm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
}

// progressBody re-arms the watchdog at every read the transport makes of
// the request body, so that a server that stops taking the body is given
// up after the response timeout, however large the body.
type progressBody struct {
	io.ReadCloser
	w     *watchdog
	limit time.Duration
}

func (b *progressBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.w.arm("stopped taking the request body for", b.limit, "response timeout")
	return n, err
}

// watchedBody is a response body whose every read must return within the
// response timeout; Close releases the exchange's context.
type watchedBody struct {
	io.ReadCloser
	w     *watchdog
	ctx   context.Context
	limit time.Duration
}

func (b *watchedBody) Read(p []byte) (int, error) {
	b.w.arm("stopped sending the response body for", b.limit, "response timeout")
	n, err := b.ReadCloser.Read(p)
	b.w.disarm()
	if err != nil && err != io.EOF {
		var te *timeoutError
		if errors.As(context.Cause(b.ctx), &te) {
			return n, te
		}
	}
	return n, err
}

func (b *watchedBody) Close() error {
	b.w.disarm()
	err := b.ReadCloser.Close()
	b.w.cancel(nil)
	return err
}
