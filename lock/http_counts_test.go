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
// backend calls, which differ: the storage clock is HEAD bucket; the
// release's conditional delete is one DELETE, no HEAD first: ADR 0055). The figures are in ADR 0019 and 0020.
func TestLock_S3_HTTPRequestsPerStep(t *testing.T) {
	skipShort(t)
	t.Run("versitygw", func(t *testing.T) {
		srv := versitygw.Start(t)
		measureHTTP(t, &srv.S3Server, 4, 1, 1, 5)
	})
	t.Run("garage", func(t *testing.T) {
		srv := garage.Start(t)
		// Claims mode: acquire's 4 and its intent's DELETE, which runs in
		// the background and can land before Acquire returns.
		measureHTTP(t, &srv.S3Server, 5, 2, 2, 5)
	})
}

// measureHTTP counts each step's HTTP requests; wantAcquire counts the
// acquisition with its background clean-up.
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
	// A heartbeat answered more than a quarter interval late finds its
	// fence suspended and lists before it reopens (one more request):
	// a 4 s interval leaves a loaded machine a second.
	const hb = 4 * time.Second
	o := lock.Options{InstanceID: "pod-a", HeartbeatInterval: hb, StaleAfter: 4 * hb, Logger: logger}

	counter.take() // the backend's probe
	l, err := lock.Acquire(ctx, st, o)
	if err != nil {
		t.Fatal(err)
	}
	acquire := counter.take()
	// The acquisition's clean-up runs in the background (claims mode: the
	// intent's DELETE): wait until it is done, not for a time.
	cleanDeadline := time.Now().Add(30 * time.Second)
	for l.Mode() == lock.ModeClaims && intentsLeft(ctx, t, watch) > 0 {
		if time.Now().After(cleanDeadline) {
			t.Fatal("the acquisition's intent was never deleted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cleanup := counter.take()
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

	t.Logf("HTTP requests (%s): acquire free lock %d %v (+ clean-up %v); one heartbeat %d %v; release %d %v; forced break %d %v",
		l.Mode(), len(acquire), acquire, cleanup, len(beat), beat, len(release), release, len(brk), brk)
	for _, c := range []struct {
		step string
		got  []string
		want int
	}{{"acquire with its clean-up", append(append([]string(nil), acquire...), cleanup...), wantAcquire}, {"heartbeat", beat, wantBeat}, {"release", release, wantRelease}, {"break", brk, wantBreak}} {
		if len(c.got) != c.want {
			t.Errorf("%s: %d HTTP requests %v, want %d", c.step, len(c.got), c.got, c.want)
		}
	}
	if l.Mode() == lock.ModeCAS && slices.Contains(release, "HEAD object") {
		t.Errorf("compare-and-swap release sent a HEAD before its conditional DELETE: %v", release)
	}
}

// intentsLeft counts the intents (claims mode) in st's lock directory.
func intentsLeft(ctx context.Context, t *testing.T, st *store.Store) int {
	t.Helper()
	n := 0
	err := storeadmin.Internal(st).List(ctx, ".lock.d/", func(i store.Info) error {
		if strings.HasSuffix(i.Name, "-1-intent") {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
