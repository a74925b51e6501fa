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
	parent, host := req.Context(), req.URL.Host
	ctx, cancel := context.WithCancelCause(parent)
	w := &watchdog{cancel: cancel, host: host}
	attempt := time.AfterFunc(c.attemptTimeout, func() {
		cancel(&timeoutError{host: host, step: "did not answer the request within", limit: c.attemptTimeout, name: "attempt timeout"})
	})
	trace := &httptrace.ClientTrace{
		GetConn: func(string) { w.arm(sending, "did not accept a connection within", c.connect, "connect timeout") },
		GotConn: func(httptrace.GotConnInfo) { w.disarm() },
		WroteHeaders: func() {
			w.arm(sending, "stopped taking the request for", c.response, "response timeout")
		},
		WroteRequest: func(httptrace.WroteRequestInfo) {
			w.arm(sending, "sent no response headers within", c.response, "response timeout")
		},
		GotFirstResponseByte: w.disarm,
	}
	req = req.WithContext(httptrace.WithClientTrace(ctx, trace))
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = &progressBody{ReadCloser: req.Body, w: w, limit: c.response}
	}
	resp, err := c.next.Do(req)
	attempt.Stop()
	if err != nil {
		w.finish()
		cause := context.Cause(ctx)
		cancel(nil)
		var te *timeoutError
		if errors.As(cause, &te) && parent.Err() == nil {
			return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Redacted(), te)
		}
		return nil, err
	}
	w.receive()
	resp.Body = &watchedBody{ReadCloser: resp.Body, w: w, ctx: ctx, limit: c.response}
	return resp, nil
}

// The phases of an exchange, for the watchdog: the request's timers mean
// nothing once the response has come (a request body can still be
// finishing when an early answer arrives), and nothing is timed once the
// exchange is over.
const (
	sending = iota
	receiving
	finished
)

// watchdog cancels an exchange when the step it is armed for takes longer
// than its limit. Trace hooks and body reads arm and disarm it from the
// transport's goroutines; one timer serves every step (re-armed at each
// read of a body, so it must not allocate).
type watchdog struct {
	cancel context.CancelCauseFunc
	host   string

	mu       sync.Mutex
	phase    int
	step     string
	name     string
	limit    time.Duration
	deadline time.Time // zero when disarmed
	timer    *time.Timer
}

// arm (re)starts the timer for step, if the exchange is in phase.
func (w *watchdog) arm(phase int, step string, limit time.Duration, name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.phase != phase {
		return
	}
	w.step, w.limit, w.name = step, limit, name
	w.deadline = time.Now().Add(limit)
	if w.timer == nil {
		w.timer = time.AfterFunc(limit, w.fire)
	} else {
		w.timer.Reset(limit)
	}
}

// fire cancels the exchange if the step armed last is overdue; a firing
// that lost a race with a re-arm or a disarm does nothing.
func (w *watchdog) fire() {
	w.mu.Lock()
	if w.deadline.IsZero() || time.Now().Before(w.deadline) || w.phase == finished {
		w.mu.Unlock()
		return
	}
	err := &timeoutError{host: w.host, step: w.step, limit: w.limit, name: w.name}
	w.mu.Unlock()
	w.cancel(err)
}

func (w *watchdog) disarm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stop()
}

func (w *watchdog) stop() {
	w.deadline = time.Time{}
	if w.timer != nil {
		w.timer.Stop()
	}
}

// receive moves the exchange to its response body.
func (w *watchdog) receive() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stop()
	w.phase = receiving
}

// finish ends the exchange: no timer runs afterwards.
func (w *watchdog) finish() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stop()
	w.phase = finished
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
	b.w.arm(sending, "stopped taking the request body for", b.limit, "response timeout")
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
	b.w.arm(receiving, "stopped sending the response body for", b.limit, "response timeout")
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
	b.w.finish()
	err := b.ReadCloser.Close()
	b.w.cancel(nil)
	return err
}
