package s3_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/s3"
)

// The failover mechanics are tested here against httptest servers that
// share one object map, like the nodes of a cluster, each of which can be
// switched to fail in one way; TestCluster_* run the same paths on a real
// three-node Garage.

// nodeMode is how a fake node answers.
type nodeMode int32

const (
	nodeOK       nodeMode = iota
	node503               // 503 ServiceUnavailable
	node403               // 403 AccessDenied
	nodeHang              // accept and read the request, never answer (until the test ends)
	nodeNoBucket          // 404 NoSuchBucket
)

type fakeCluster struct {
	mu      sync.Mutex
	objects map[string][]byte
}

type fakeNode struct {
	*httptest.Server
	mode     atomic.Int32
	requests atomic.Int64
	date     time.Time // the Date header this node sends; its clock
	methods  sync.Map  // method → *atomic.Int64
}

func (n *fakeNode) set(m nodeMode) { n.mode.Store(int32(m)) }

func (n *fakeNode) count(method string) int64 {
	v, ok := n.methods.Load(method)
	if !ok {
		return 0
	}
	return v.(*atomic.Int64).Load()
}

// newFakeCluster starts n nodes; node i's clock reads i hours past a fixed
// time, so that a Date tells which node answered.
func newFakeCluster(t *testing.T, n int) []*fakeNode {
	t.Helper()
	c := &fakeCluster{objects: map[string][]byte{}}
	done := make(chan struct{})
	nodes := make([]*fakeNode, n)
	for i := range nodes {
		node := &fakeNode{date: time.Date(2030, 1, 1, i, 0, 0, 0, time.UTC)}
		node.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			node.requests.Add(1)
			v, _ := node.methods.LoadOrStore(r.Method, new(atomic.Int64))
			v.(*atomic.Int64).Add(1)
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("Date", node.date.Format(http.TimeFormat))
			switch nodeMode(node.mode.Load()) {
			case node503:
				s3Error(w, http.StatusServiceUnavailable, "ServiceUnavailable")
				return
			case node403:
				s3Error(w, http.StatusForbidden, "AccessDenied")
				return
			case nodeNoBucket:
				s3Error(w, http.StatusNotFound, "NoSuchBucket")
				return
			case nodeHang:
				select {
				case <-done:
				case <-r.Context().Done():
				}
				return
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			switch r.Method {
			case http.MethodPut:
				c.objects[r.URL.Path] = body
				w.Header().Set("ETag", `"0123456789abcdef0123456789abcdef"`)
			case http.MethodGet, http.MethodHead:
				if r.URL.Path == "/b" || r.URL.Path == "/b/" {
					return // HeadBucket
				}
				data, ok := c.objects[r.URL.Path]
				if !ok {
					s3Error(w, http.StatusNotFound, "NoSuchKey")
					return
				}
				w.Header().Set("ETag", `"0123456789abcdef0123456789abcdef"`)
				_, _ = w.Write(data)
			case http.MethodDelete:
				delete(c.objects, r.URL.Path)
				w.WriteHeader(http.StatusNoContent)
			}
		}))
		nodes[i] = node
	}
	t.Cleanup(func() {
		close(done)
		for _, n := range nodes {
			n.Close()
		}
	})
	return nodes
}

func endpointList(nodes ...*fakeNode) string {
	urls := make([]string, len(nodes))
	for i, n := range nodes {
		urls[i] = n.URL
	}
	return strings.Join(urls, ",")
}

// fakeBackend opens a backend on the nodes' endpoints (conditional=off:
// these tests are about routing, not conditions), logging into log.
func fakeBackend(t *testing.T, endpoint string, log *bytes.Buffer, edit func(*s3.Options)) *s3.Backend {
	t.Helper()
	var h slog.Handler = slog.NewTextHandler(t.Output(), nil)
	if log != nil {
		h = slog.NewTextHandler(io.MultiWriter(log, t.Output()), nil)
	}
	opts := s3.Options{
		Bucket: "b", Endpoint: endpoint, Region: "us-east-1", PathStyle: true, Conditional: s3.ConditionalOff,
		Credentials: credentials.NewStaticCredentialsProvider("AK", "SK", ""),
		Logger:      slog.New(h),
		HTTPClient:  httpClient(t),
	}
	if edit != nil {
		edit(&opts)
	}
	b, err := s3.NewBackend(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestFailover_5xx_MovesToTheNextEndpointAndStaysThere(t *testing.T) {
	nodes := newFakeCluster(t, 3)
	var log bytes.Buffer
	b := fakeBackend(t, endpointList(nodes...), &log, nil)
	nodes[0].set(node503)
	if _, err := b.Put(t.Context(), "k", []byte("v"), backend.PutOptions{}); err != nil {
		t.Fatalf("Put with the first endpoint answering 503: %v", err)
	}
	if got := b.CurrentEndpoint(); got != nodes[1].URL {
		t.Errorf("current endpoint = %s, want the second, %s", got, nodes[1].URL)
	}
	// The first endpoint recovers; requests stay on the second.
	nodes[0].set(nodeOK)
	for range 5 {
		if _, _, err := get(t, b, "k"); err != nil {
			t.Fatal(err)
		}
	}
	if n := nodes[0].requests.Load(); n != 1 {
		t.Errorf("the first endpoint got %d requests, want 1 (the failed one, then none)", n)
	}
	if n := nodes[1].requests.Load(); n != 6 {
		t.Errorf("the second endpoint got %d requests, want 6", n)
	}
	l := log.String()
	for _, want := range []string{"switching to the next one", "from=" + nodes[0].URL, "to=" + nodes[1].URL, "503"} {
		if !strings.Contains(l, want) {
			t.Errorf("failover log lacks %q:\n%s", want, l)
		}
	}
}

func TestFailover_ConnectionRefused_NextEndpointWithoutWaiting(t *testing.T) {
	nodes := newFakeCluster(t, 2)
	dead := nodes[0].URL
	nodes[0].Close() // connection refused from now on
	b := fakeBackend(t, endpointList(nodes...), nil, nil)
	start := time.Now()
	if _, err := b.Put(t.Context(), "k", []byte("v"), backend.PutOptions{}); err != nil {
		t.Fatalf("Put with the first endpoint down: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("failing over from a refused connection took %v", d)
	}
	if b.CurrentEndpoint() == dead {
		t.Error("still on the dead endpoint")
	}
}

func TestFailover_HungEndpoint_GivenUpAfterTheResponseTimeout(t *testing.T) {
	nodes := newFakeCluster(t, 2)
	nodes[0].set(nodeHang)
	b := fakeBackend(t, endpointList(nodes...), nil, func(o *s3.Options) { o.ResponseTimeout = 300 * time.Millisecond })
	start := time.Now()
	if _, err := b.Put(t.Context(), "k", []byte("v"), backend.PutOptions{}); err != nil {
		t.Fatalf("Put with the first endpoint hung: %v", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 3*time.Second {
		t.Errorf("failover from a hung endpoint took %v, want about the 300ms response timeout", d)
	}
	if got := nodes[1].count(http.MethodPut); got != 1 {
		t.Errorf("second endpoint got %d PUTs, want 1", got)
	}
}

func TestFailover_EveryEndpointDown_ErrorNamesTheLastAndTriesEachOnce(t *testing.T) {
	nodes := newFakeCluster(t, 3)
	for _, n := range nodes {
		n.set(node503)
	}
	b := fakeBackend(t, endpointList(nodes...), nil, nil)
	_, err := b.Put(t.Context(), "k", []byte("v"), backend.PutOptions{})
	if err == nil {
		t.Fatal("Put succeeded with every endpoint answering 503")
	}
	for i, n := range nodes {
		if got := n.requests.Load(); got != 1 {
			t.Errorf("endpoint %d got %d requests, want 1", i, got)
		}
	}
	if !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "3 attempts") || !strings.Contains(err.Error(), nodes[2].URL) {
		t.Errorf("error %q should say 503, 3 attempts and name the last endpoint", err)
	}
}

// Permanent answers are not retried, nor sent to another endpoint: another
// node of the same cluster would give the same answer.
func TestPermanentErrors_NotRetriedNorFailedOver(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode nodeMode
		is   error
	}{
		{"403 AccessDenied", node403, backend.ErrPermission},
		{"404 NoSuchBucket", nodeNoBucket, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := newFakeCluster(t, 2)
			nodes[0].set(tc.mode)
			b := fakeBackend(t, endpointList(nodes...), nil, nil)
			_, err := b.Put(t.Context(), "k", []byte("v"), backend.PutOptions{})
			if err == nil {
				t.Fatal("Put succeeded")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("Put = %v, want an error matching %v", err, tc.is)
			}
			if a, b := nodes[0].requests.Load(), nodes[1].requests.Load(); a != 1 || b != 0 {
				t.Errorf("requests: first endpoint %d, second %d; want 1 and 0", a, b)
			}
		})
	}
}

// The storage clock is the clock of the endpoint that answered: after a
// failover, Now and every Object.Now come from the new endpoint.
func TestClock_ComesFromTheEndpointThatAnswered(t *testing.T) {
	nodes := newFakeCluster(t, 2)
	b := fakeBackend(t, endpointList(nodes...), nil, nil)
	obj, err := b.Put(t.Context(), "k", []byte("v"), backend.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !obj.Now.Equal(nodes[0].date) {
		t.Errorf("Put Now = %v, want the first endpoint's %v", obj.Now, nodes[0].date)
	}
	nodes[0].set(node503)
	now, err := b.Now(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !now.Equal(nodes[1].date) {
		t.Errorf("Now after failover = %v, want the second endpoint's %v", now, nodes[1].date)
	}
	_, o, err := get(t, b, "k")
	if err != nil {
		t.Fatal(err)
	}
	if !o.Now.Equal(nodes[1].date) {
		t.Errorf("Get Now after failover = %v, want the second endpoint's %v", o.Now, nodes[1].date)
	}
}

// A context deadline cuts the retries: nothing is sent after it, however
// many attempts remain (a fenced write must not land after its lease).
func TestRetries_StopAtTheContextDeadline_NothingSentAfterIt(t *testing.T) {
	nodes := newFakeCluster(t, 1)
	nodes[0].set(node503)
	b := fakeBackend(t, nodes[0].URL, nil, func(o *s3.Options) {
		o.MaxAttempts = 100
		o.MaxBackoff = 50 * time.Millisecond
	})
	ctx, cancel := context.WithTimeout(t.Context(), 400*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := b.Put(ctx, "k", []byte("v"), backend.PutOptions{})
	elapsed := time.Since(start)
	if err == nil {
		t.Fatal("Put succeeded against 503s")
	}
	if elapsed > 600*time.Millisecond {
		t.Errorf("Put returned %v after its 400ms deadline began", elapsed)
	}
	sent := nodes[0].count(http.MethodPut)
	if sent < 2 {
		t.Errorf("only %d attempts before the deadline; the test needs retries to cut", sent)
	}
	time.Sleep(300 * time.Millisecond)
	if later := nodes[0].count(http.MethodPut); later != sent {
		t.Errorf("%d PUTs were sent after Put returned", later-sent)
	}
}

func get(t *testing.T, b backend.Backend, key string) ([]byte, backend.Object, error) {
	t.Helper()
	rc, obj, err := b.Get(t.Context(), key)
	if err != nil {
		return nil, obj, err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	return data, obj, err
}
