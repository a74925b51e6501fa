package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairnhq/state/testutil/versitygw"
)

// lateProxy stands between the CLI and the storage: once armed, it holds
// the first PUT whose path ends with suffix — the client waits, gives up
// or is stopped — and sends it on to the server only when delivered: a
// request the server applies after its client let go of it.
type lateProxy struct {
	*httptest.Server
	upstream *url.URL
	suffix   string

	mu      sync.Mutex
	armed   bool
	held    *http.Request
	body    []byte
	holding chan struct{} // closed once a request is held
}

func newLateProxy(t *testing.T, upstream, suffix string) *lateProxy {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	p := &lateProxy{upstream: u, suffix: suffix, holding: make(chan struct{})}
	p.Server = httptest.NewServer(p)
	t.Cleanup(p.Close)
	return p
}

func (p *lateProxy) arm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = true
}

func (p *lateProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	hold := p.armed && p.held == nil && r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, p.suffix)
	if hold {
		p.held, p.body = r.Clone(r.Context()), body
		close(p.holding)
	}
	p.mu.Unlock()
	if hold {
		<-r.Context().Done() // the client gave up, or its process ended
		return
	}
	resp, err := p.send(r, body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// send forwards r to the server as it came, signed for the proxy's host.
func (p *lateProxy) send(r *http.Request, body []byte) (*http.Response, error) {
	out, err := http.NewRequest(r.Method, p.upstream.String()+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	out.Header = r.Header.Clone()
	out.Host = r.Host
	out.ContentLength = int64(len(body))
	return http.DefaultTransport.RoundTrip(out)
}

// deliver sends the held request to the server now and returns its
// status.
func (p *lateProxy) deliver(t *testing.T) int {
	t.Helper()
	p.mu.Lock()
	r, body := p.held, p.body
	p.mu.Unlock()
	if r == nil {
		t.Fatal("no request was held")
	}
	resp, err := p.send(r, body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode
}

// Black-box, through the CLI and a real server: a put whose data write is
// in flight when the process is stopped (SIGTERM: it releases the lock and
// exits), then an immediate second put of another value, then the first
// write delivered to the server: the second value survives (issue 23,
// findings 1 and 2). On versitygw the late write fails its condition; it
// replaced the second value on 0ac0f30.
func TestPut_StoppedWithWriteInFlight_NextValueSurvivesTheLateWrite(t *testing.T) {
	srv := versitygw.Start(t)
	proxy := newLateProxy(t, srv.Endpoint, "/app/value")
	viaProxy := srv.S3Server
	viaProxy.Endpoint = proxy.URL
	tg := s3Target(t, "versitygw", &viaProxy)
	id, _ := tg.keygen(t, "id.txt")
	tg.cli(t, nil, "init", "--identity", id).must(t, exitOK) // only init creates a store (#24)
	tg.cli(t, []byte("v0"), "put", "app/value", "--identity", id).must(t, exitOK)

	proxy.arm()
	first := exec.Command(binPath, "put", "app/value", "--identity", id)
	first.Env = tg.environ()
	first.Dir = tg.dir
	first.Stdin = strings.NewReader("first")
	var stderr bytes.Buffer
	first.Stderr = &stderr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-proxy.holding:
	case <-time.After(time.Minute):
		_ = first.Process.Kill()
		t.Fatalf("the first put's write never reached the proxy:\n%s", stderr.String())
	}
	if err := first.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- first.Wait() }()
	select {
	case err := <-done:
		t.Logf("first put, stopped with its write in flight: %v\n%s", err, stderr.String())
	case <-time.After(time.Minute):
		_ = first.Process.Kill()
		t.Fatal("the stopped put did not exit")
	}

	tg.cli(t, []byte("second"), "put", "app/value", "--identity", id).must(t, exitOK)
	status := proxy.deliver(t)
	t.Logf("the first put's write, delivered late: HTTP %d", status)
	r := tg.cli(t, nil, "get", "app/value", "--identity", id).must(t, exitOK)
	if r.stdout != "second" {
		t.Fatalf("app/value = %q after the first put's write was delivered late (HTTP %d); want the second put's value", r.stdout, status)
	}
}
