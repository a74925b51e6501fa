package lock_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/s3"
	"github.com/cairnhq/state/internal/driver"
	"github.com/cairnhq/state/internal/lockadmin"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
	"github.com/cairnhq/state/testutil"
	"github.com/cairnhq/state/testutil/garage"
	"github.com/cairnhq/state/testutil/versitygw"
)

// httpCounter is a RoundTripper that records every request an S3 backend
// sends, as "METHOD bucket" or "METHOD object".
type httpCounter struct {
	next http.RoundTripper
	mu   sync.Mutex
	reqs []string
}

func (c *httpCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	target := "object"
	if strings.Count(strings.Trim(r.URL.Path, "/"), "/") == 0 {
		target = "bucket" // path style: /bucket, no key
	}
	c.mu.Lock()
	c.reqs = append(c.reqs, r.Method+" "+target)
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

// waitFor waits until n requests were recorded since the last take, or
// until d passed: the rest of a step that is seen to have begun.
func (c *httpCounter) waitFor(n int, d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		c.mu.Lock()
		got := len(c.reqs)
		c.mu.Unlock()
		if got >= n {
			return
		}
	}
}

// take returns the requests recorded since the last take, sorted.
func (c *httpCounter) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.reqs
	c.reqs = nil
	slices.Sort(r)
	return r
}

// TestLock_S3_HTTPRequestsPerStep measures what the lock's steps cost in
// HTTP requests on real S3 servers (the locktest RequestCounts case counts
// backend calls, which may differ: the storage clock is HEAD bucket). The
// figures are in ADR 0066 and 0067.
func TestLock_S3_HTTPRequestsPerStep(t *testing.T) {
	skipShort(t)
	t.Run("versitygw", func(t *testing.T) {
		srv := versitygw.Start(t)
		// Compare-and-swap: a released lock object taken (GET, PUT), a
		// heartbeat (PUT), a release (PUT of a released record); a forced
		// break LISTs, GETs and writes a released record.
		measureHTTP(t, &srv.S3Server, 2, 1, 1, 3)
	})
	t.Run("garage", func(t *testing.T) {
		srv := garage.Start(t)
		// Claims: PUT intent, LIST, PUT held, PUT marker; PUT, LIST; one
		// DeleteObjects; a forced break LISTs, GETs the held claim, PUTs
		// a marker and deletes the claim and its intent in one request.
		measureHTTP(t, &srv.S3Server, 4, 2, 1, 4)
	})
}

// measureHTTP counts each step's HTTP requests. In compare-and-swap mode
// the acquisition measured is the store's second: the first finds no
// lock object, which every later one finds (it is logged).
func measureHTTP(t *testing.T, srv *testutil.S3Server, wantAcquire, wantBeat, wantRelease, wantBreak int) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	bucket := srv.NewBucket(t)
	counter := &httpCounter{next: http.DefaultTransport.(*http.Transport).Clone()}
	opts := srv.Options(bucket)
	opts.HTTPClient = &http.Client{Transport: counter}
	opts.Logger = logger
	b, err := s3.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.(io.Closer).Close() })
	if _, err := driver.ResolveCapabilities(ctx, b); err != nil { // the probe
		t.Fatal(err)
	}
	env := testkit.Envelope(t)
	open := func(b backend.Backend) *store.Store {
		st, err := storeadmin.Open(b, env, store.Options{Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := open(b)
	watch := open(srv.Backend(t, bucket)) // uncounted: to see heartbeats land
	// A claims heartbeat answered more than a quarter interval late finds
	// its fence suspended and reads the claims it listed before it
	// reopens (more requests): a 4 s interval leaves a loaded machine a
	// second.
	const hb = 4 * time.Second
	o := lock.Options{InstanceID: "pod-a", HeartbeatInterval: hb, StaleAfter: 4 * hb, Logger: logger}

	counter.take() // the backend's probe
	var first, firstRelease []string
	if b.Capabilities().ConditionalWrites {
		l0, err := lock.Acquire(ctx, st, o)
		if err != nil {
			t.Fatal(err)
		}
		first = counter.take()
		if err := l0.Release(ctx); err != nil {
			t.Fatal(err)
		}
		firstRelease = counter.take()
	}
	l, err := lock.Acquire(ctx, st, o)
	if err != nil {
		t.Fatal(err)
	}
	acquire := counter.take()
	s0, err := lockadmin.Inspect(ctx, watch, lockadmin.InspectOptions{StaleAfter: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	counter.take()
	deadline := time.Now().Add(3 * hb)
	for {
		s, err := lockadmin.Inspect(ctx, watch, lockadmin.InspectOptions{StaleAfter: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if s.Version != s0.Version {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no heartbeat landed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The heartbeat's PUT landed; its LIST (claims mode) follows it, long
	// before the next heartbeat: the step is done when its requests are
	// in, or half a heartbeat on (then the count below says so).
	counter.waitFor(wantBeat, hb/2)
	beat := counter.take()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	release := counter.take()

	// A forced break of a live lock held by another instance.
	other, err := lock.Acquire(ctx, watch, lock.Options{InstanceID: "pod-b", HeartbeatInterval: time.Minute, StaleAfter: 5 * time.Minute, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Release(context.Background()) })
	counter.take()
	if _, err := lockadmin.Break(ctx, st, lockadmin.BreakOptions{Holder: "pod-b", Force: true, Logger: logger}); err != nil {
		t.Fatal(err)
	}
	brk := counter.take()

	if first != nil {
		t.Logf("HTTP requests (%s): the store's first acquisition %d %v, its release %d %v", l.Mode(), len(first), first, len(firstRelease), firstRelease)
	}
	t.Logf("HTTP requests (%s): acquire %d %v; one heartbeat %d %v; release %d %v; forced break %d %v",
		l.Mode(), len(acquire), acquire, len(beat), beat, len(release), release, len(brk), brk)
	for _, c := range []struct {
		step string
		got  []string
		want int
	}{{"acquire", acquire, wantAcquire}, {"heartbeat", beat, wantBeat}, {"release", release, wantRelease}, {"break", brk, wantBreak}} {
		if len(c.got) != c.want {
			t.Errorf("%s: %d HTTP requests %v, want %d", c.step, len(c.got), c.got, c.want)
		}
	}
}
