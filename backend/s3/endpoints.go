package s3

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// endpoints are the base URLs one backend sends its requests to, in order
// of preference, and which of them is in use (ADR 0015). Every request
// starts on the current endpoint; when it fails there in a way another
// endpoint could cure (no connection, a timeout, a 5xx), the request moves
// on to the next endpoint and so does every later request: the backend
// stays on the last endpoint that answered rather than going back to the
// first, so that a dead node costs one failed attempt, not one per request.
type endpoints struct {
	urls    []string // empty: AWS, through the SDK's own resolution
	current atomic.Int64
	log     *slog.Logger
}

// get returns the index of the endpoint in use and the option that sends a
// request there.
func (e *endpoints) get() (int, func(*s3.Options)) {
	if len(e.urls) == 0 {
		return 0, func(*s3.Options) {}
	}
	i := int(e.current.Load())
	return i, e.at(i)
}

// at returns the option that sends a request to endpoint i.
func (e *endpoints) at(i int) func(*s3.Options) {
	if len(e.urls) == 0 {
		return func(*s3.Options) {}
	}
	url := e.urls[i]
	return func(o *s3.Options) { o.BaseEndpoint = aws.String(url) }
}

// name returns endpoint i for messages: its URL ("aws" when the SDK picks).
func (e *endpoints) name(i int) string {
	if len(e.urls) == 0 {
		return "aws"
	}
	return e.urls[i]
}

// failover moves the backend off endpoint i, which just failed with err,
// unless another request already did; it reports whether there is another
// endpoint to try. The move is logged once, by the request that made it.
func (e *endpoints) failover(ctx context.Context, i int, op string, err error) bool {
	if len(e.urls) < 2 {
		return false
	}
	next := (i + 1) % len(e.urls)
	if e.current.CompareAndSwap(int64(i), int64(next)) {
		e.log.WarnContext(ctx, "s3 backend: endpoint failed; switching to the next one",
			slog.String("from", e.urls[i]), slog.String("to", e.urls[next]),
			slog.String("operation", op), slog.String("error", shortError(err)))
	}
	return true
}

// shortError is err as a failover log line wants it: the server's status
// and code, or the timeout or network error, without the SDK's layers.
func shortError(err error) string {
	code, status := errorCode(err)
	switch {
	case status != 0 && code != "":
		return fmt.Sprintf("%d %s", status, code)
	case status != 0:
		return fmt.Sprintf("HTTP %d", status)
	}
	return rootCause(err)
}
