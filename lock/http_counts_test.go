package lock_test

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/s3"
	"github.com/cairnhq/state/envelope"
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
// backend calls, which differ: a conditional delete is HEAD + DELETE, the
// storage clock is HEAD bucket). The figures are in ADR 0019 and 0020.
func TestLock_S3_HTTPRequestsPerStep(t *testing.T) {
	skipShort(t)
	t.Run("versitygw", func(t *testing.T) {
		srv := versitygw.Start(t)
		measureHTTP(t, &srv.S3Server, 4, 1, 2, 5)
	})
	t.Run("garage", func(t *testing.T) {
		srv := garage.Start(t)
		measureHTTP(t, &srv.S3Server, 4, 2, 2, 5)
	})
}

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
	t.Cleanup(func() { _ = b.Close() })
	if _, err := b.ResolveCapabilities(ctx); err != nil { // the probe
		t.Fatal(err)
	}
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	env, err := envelope.New([]age.Identity{id}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	open := func(b backend.Backend) *store.Store {
		st, err := store.Open(b, env, store.Options{Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := open(b)
	watch := open(srv.Backend(t, bucket)) // uncounted: to see heartbeats land
	o := lock.Options{InstanceID: "pod-a", HeartbeatInterval: time.Second, StaleAfter: 4 * time.Second, Logger: logger}

	counter.take() // the backend's probe
	l, err := lock.Acquire(ctx, st, o)
	if err != nil {
		t.Fatal(err)
	}
	acquire := counter.take()
	time.Sleep(300 * time.Millisecond) // the acquisition's clean-up, in the background
	cleanup := counter.take()
	s0, err := lock.Inspect(ctx, watch, &lock.InspectOptions{StaleAfter: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	counter.take()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := lock.Inspect(ctx, watch, &lock.InspectOptions{StaleAfter: time.Minute})
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
	if _, err := lock.Break(ctx, st, &lock.BreakOptions{Holder: "pod-b", Force: true, Logger: logger}); err != nil {
		t.Fatal(err)
	}
	brk := counter.take()

	t.Logf("HTTP requests (%s): acquire free lock %d %v (+ clean-up %v); one heartbeat %d %v; release %d %v; forced break %d %v",
		l.Mode(), len(acquire), acquire, cleanup, len(beat), beat, len(release), release, len(brk), brk)
	for _, c := range []struct {
		step string
		got  []string
		want int
	}{{"acquire", acquire, wantAcquire}, {"heartbeat", beat, wantBeat}, {"release", release, wantRelease}, {"break", brk, wantBreak}} {
		if len(c.got) != c.want {
			t.Errorf("%s: %d HTTP requests %v, want %d", c.step, len(c.got), c.got, c.want)
		}
	}
	if l.Mode() == lock.ModeCAS && !slices.Contains(release, "HEAD object") {
		t.Errorf("compare-and-swap release sent no HEAD before its conditional DELETE: %v", release)
	}
}
