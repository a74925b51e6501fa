package driver_test

import (
	"context"
	"errors"
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/driver"
)

// lazy is a backend whose conditional writes are known only once resolved.
type lazy struct {
	backend.Backend
	resolved bool
	err      error
}

func (l *lazy) Capabilities() backend.Capabilities {
	return backend.Capabilities{ConditionalWrites: l.resolved}
}

func (l *lazy) ResolveCapabilities(context.Context) (backend.Capabilities, error) {
	if l.err != nil {
		return backend.Capabilities{}, l.err
	}
	l.resolved = true
	return l.Capabilities(), nil
}

func TestResolveCapabilities_ResolverIsAsked(t *testing.T) {
	l := &lazy{Backend: mem.New(mem.Options{})}
	if l.Capabilities().ConditionalWrites {
		t.Fatal("test bug: resolved before asked")
	}
	caps, err := driver.ResolveCapabilities(t.Context(), l)
	if err != nil || !caps.ConditionalWrites || !l.resolved {
		t.Errorf("ResolveCapabilities = %+v, %v (resolved: %v); want conditional writes, resolved", caps, err, l.resolved)
	}
	l.err = errors.New("storage unreachable")
	if _, err := driver.ResolveCapabilities(t.Context(), l); !errors.Is(err, l.err) {
		t.Errorf("a failing resolution returned %v, want its error", err)
	}
}

func TestResolveCapabilities_PlainBackendReportsItsCapabilities(t *testing.T) {
	for _, noCAS := range []bool{false, true} {
		b := mem.New(mem.Options{NoConditionalWrites: noCAS})
		caps, err := driver.ResolveCapabilities(t.Context(), b)
		if err != nil || caps != b.Capabilities() {
			t.Errorf("ResolveCapabilities(mem, NoConditionalWrites=%v) = %+v, %v; want %+v", noCAS, caps, err, b.Capabilities())
		}
	}
}
