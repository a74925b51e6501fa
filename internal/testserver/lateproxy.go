package testserver

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// LateProxy stands between a client and an S3 server: once armed, it
// holds the first PUT whose path ends with the suffix it was made with —
// the client waits, gives up or is stopped — and sends it on to the server
// only when Deliver is called: a request the server applies after its
// client let go of it. Every other request passes through.
type LateProxy struct {
	// URL is the endpoint to give the client instead of the server's.
	URL string

	srv      *httptest.Server
	upstream *url.URL
	suffix   string

	mu      sync.Mutex
	armed   bool
	held    *http.Request
	body    []byte
	holding chan struct{} // closed once a request is held
}

// NewLateProxy starts a proxy in front of upstream (an http:// endpoint),
// closed when the test ends.
func NewLateProxy(t testing.TB, upstream, suffix string) *LateProxy {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	p := &LateProxy{upstream: u, suffix: suffix, holding: make(chan struct{})}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	p.URL = p.srv.URL
	t.Cleanup(p.srv.Close)
	return p
}

// Arm makes the proxy hold the next matching PUT.
func (p *LateProxy) Arm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = true
}

// Holding is closed once a request is held.
func (p *LateProxy) Holding() <-chan struct{} { return p.holding }

func (p *LateProxy) serve(w http.ResponseWriter, r *http.Request) {
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
func (p *LateProxy) send(r *http.Request, body []byte) (*http.Response, error) {
	out, err := http.NewRequest(r.Method, p.upstream.String()+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	out.Header = r.Header.Clone()
	out.Host = r.Host
	out.ContentLength = int64(len(body))
	return http.DefaultTransport.RoundTrip(out)
}

// Deliver sends the held request to the server now and returns the
// server's status code.
func (p *LateProxy) Deliver(t testing.TB) int {
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
