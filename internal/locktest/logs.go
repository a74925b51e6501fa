package locktest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// logRecorder is a slog.Handler that keeps records for assertions and
// echoes them to the test log.
type logRecorder struct {
	t     testing.TB
	mu    *sync.Mutex
	recs  *[]string
	attrs []slog.Attr
}

func newLogRecorder(t testing.TB) *logRecorder {
	return &logRecorder{t: t, mu: new(sync.Mutex), recs: new([]string)}
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	for _, a := range h.attrs {
		fmt.Fprintf(&b, " %s", a)
	}
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s", a)
		return true
	})
	h.mu.Lock()
	*h.recs = append(*h.recs, b.String())
	h.mu.Unlock()
	return nil
}

func (h *logRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return &c
}

func (h *logRecorder) WithGroup(string) slog.Handler { return h }

// find returns the first record containing all of parts.
func (h *logRecorder) find(parts ...string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range *h.recs {
		ok := true
		for _, p := range parts {
			if !strings.Contains(r, p) {
				ok = false
				break
			}
		}
		if ok {
			return r, true
		}
	}
	return "", false
}

func (h *logRecorder) dump() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(*h.recs, "\n")
}
