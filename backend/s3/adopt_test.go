package s3_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/s3"
)

// A store's recorded capabilities are adopted without a request (a
// conditional=auto backend no longer probes in every process), kept over
// a later ResolveCapabilities, and refused when the URL forces the other
// lock mode.
func TestAdoptCapabilities_NoRequest_ForcedModeMustAgree(t *testing.T) {
	srv := fakeS3(t, false)
	for _, recorded := range []bool{true, false} {
		b, counts := fakeBackendCounting(t, srv.URL, s3.ConditionalAuto, nil, nil)
		if err := b.AdoptCapabilities(backend.Capabilities{ConditionalWrites: recorded, CopySourceConditions: !recorded, Evidence: "the probe at creation"}); err != nil {
			t.Fatal(err)
		}
		caps, err := b.ResolveCapabilities(t.Context())
		if err != nil || caps.ConditionalWrites != recorded || caps.CopySourceConditions != !recorded || !strings.Contains(caps.Evidence, "recorded in the store's manifest: the probe at creation") {
			t.Fatalf("after adopting %v: %+v, %v", recorded, caps, err)
		}
		if n := counts.count("PUT") + counts.count("GET") + counts.count("DELETE"); n != 0 {
			t.Errorf("adopting sent %d requests, want none", n)
		}
		// The copy conditions were adopted too: a copy conditional on
		// the source is sent or refused
		// without a probe, as recorded.
		_, cerr := b.Copy(t.Context(), "a", "b", backend.CopyOptions{IfSourceVersion: `"x"`})
		if refused := errors.Is(cerr, backend.ErrUnsupported); refused != recorded {
			t.Errorf("adopted copy source conditions %v: a conditional copy = %v", !recorded, cerr)
		}
		// Adopting the other mode after this is a mismatch.
		if err := b.AdoptCapabilities(backend.Capabilities{ConditionalWrites: !recorded}); !errors.Is(err, backend.ErrCapabilityMismatch) {
			t.Errorf("adopting the other mode: %v, want ErrCapabilityMismatch", err)
		}
	}
	for _, c := range []struct {
		mode     s3.ConditionalMode
		recorded bool
		ok       bool
	}{
		{s3.ConditionalOn, true, true},
		{s3.ConditionalOn, false, false},
		{s3.ConditionalOff, false, true},
		{s3.ConditionalOff, true, false},
	} {
		b, _ := fakeBackendCounting(t, srv.URL, c.mode, nil, nil)
		err := b.AdoptCapabilities(backend.Capabilities{ConditionalWrites: c.recorded})
		switch {
		case c.ok && err != nil:
			t.Errorf("conditional=%s, recorded %v: %v", c.mode, c.recorded, err)
		case !c.ok && (!errors.Is(err, backend.ErrCapabilityMismatch) || !strings.Contains(err.Error(), "remove conditional="+string(c.mode))):
			t.Errorf("conditional=%s, recorded %v: %v, want ErrCapabilityMismatch saying to remove the parameter", c.mode, c.recorded, err)
		}
	}
	// A backend that probed first: the record must agree with its finding.
	b, _ := fakeBackendCounting(t, srv.URL, s3.ConditionalAuto, nil, nil)
	if _, err := b.ResolveCapabilities(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.AdoptCapabilities(backend.Capabilities{ConditionalWrites: false}); !errors.Is(err, backend.ErrCapabilityMismatch) {
		t.Errorf("a record that disagrees with this process's probe: %v", err)
	}
}
