package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cairnhq/state/internal/storemeta"
	"github.com/cairnhq/state/testutil"
	"github.com/cairnhq/state/testutil/garage"
	"github.com/cairnhq/state/testutil/versitygw"
)

// countingProxy forwards requests to an S3 server and counts them, by
// method and by whether they list (GET on the bucket with list-type).
type countingProxy struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []string // "GET key", "LIST", "PUT key", "DELETE key", "HEAD …"
}

func newCountingProxy(t *testing.T, endpoint string) *countingProxy {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := &countingProxy{}
	rp := httputil.NewSingleHostReverseProxy(u)
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		what := r.Method + " " + r.URL.Path
		if r.Method == http.MethodGet && r.URL.Query().Has("list-type") {
			what = "LIST " + r.URL.Query().Get("prefix")
		}
		p.mu.Lock()
		p.got = append(p.got, what)
		p.mu.Unlock()
		rp.ServeHTTP(w, r) // the Host header stays the proxy's: what the client signed
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// take returns the requests counted since the last take.
func (p *countingProxy) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.got
	p.got = nil
	return out
}

// proxiedTarget is s3Target with the CLI's requests sent through a
// counting proxy.
func proxiedTarget(t *testing.T, name string, srv *testutil.S3Server) (*target, *countingProxy) {
	tg := s3Target(t, name, srv)
	p := newCountingProxy(t, srv.Endpoint)
	tg.url = strings.Replace(tg.url, url.QueryEscape(srv.Endpoint), url.QueryEscape(p.srv.URL), 1)
	return tg, p
}

// TestPut_RequestCounts counts the requests of one `cairn-state put` on a
// store that exists, through a counting proxy in front of the server, with
// history on (the default): a put of a new name and an overwrite, each the
// first write of its name in its holding, as every CLI put is. Issue #24's
// goal, which these limits pin: versitygw 7 — GET .store; GET .lock, PUT
// .lock (the lock object kept released between holders, ADR 0066); LIST
// history; PUT value; PUT keep; PUT .lock (release) — and Garage 10 — GET
// .store; PUT intent, LIST, PUT held, PUT marker; LIST history; GET
// header; PUT value; PUT keep; one DeleteObjects at the release (ADR
// 0067). The writer is in each object's header, not in a writer record
// (ADR 0064).
func TestPut_RequestCounts(t *testing.T) {
	for _, s := range []struct {
		name  string
		start func(t *testing.T) *testutil.S3Server
		most  int
	}{
		{"versitygw", func(t *testing.T) *testutil.S3Server { return &versitygw.Start(t).S3Server }, 7},
		{"garage", func(t *testing.T) *testutil.S3Server { return &garage.Start(t).S3Server }, 10},
	} {
		t.Run(s.name, func(t *testing.T) {
			tg, p := proxiedTarget(t, s.name, s.start(t))
			id, _ := tg.keygen(t, "id.txt")
			env := []string{"CAIRN_STATE_IDENTITY=" + id}
			value := filepath.Join(tg.dir, "value")
			if err := os.WriteFile(value, []byte("v1"), 0o600); err != nil {
				t.Fatal(err)
			}
			tg.cliEnv(t, nil, env, "init").must(t, exitOK)
			created := p.take()
			tg.cliEnv(t, nil, env, "put", "app/first", value).must(t, exitOK)
			p.take()
			t.Logf("%s: creating the store: %d requests", s.name, len(created))
			for _, put := range []string{"a new name", "an overwrite"} {
				tg.cliEnv(t, nil, env, "put", "app/value", value).must(t, exitOK)
				got := p.take()
				t.Logf("%s: one put (%s) on the existing store: %d requests: %s\n%s", s.name, put, len(got), strings.Join(summarize(got), ", "), strings.Join(got, "\n"))
				manifestReads := 0
				for _, r := range got {
					if strings.Contains(r, ".probe-") {
						t.Errorf("the put probed the server: %s", r)
					}
					if strings.Contains(r, ".writers") {
						t.Errorf("the put wrote a writer record: %s", r)
					}
					if r == "GET /"+strings.TrimPrefix(tg.key(storemeta.ManifestName), "/") || strings.HasSuffix(r, "/"+tg.key(storemeta.ManifestName)) {
						manifestReads++
					}
				}
				if manifestReads != 1 {
					t.Errorf("the put (%s) read the manifest %d times, want once", put, manifestReads)
				}
				if len(got) > s.most {
					t.Errorf("a put (%s) on %s took %d requests, want at most %d:\n%s", put, s.name, len(got), s.most, strings.Join(got, "\n"))
				}
			}
		})
	}
}

// summarize counts requests by method.
func summarize(reqs []string) []string {
	n := map[string]int{}
	for _, r := range reqs {
		m, _, _ := strings.Cut(r, " ")
		n[m]++
	}
	var out []string
	for m, c := range n {
		out = append(out, fmt.Sprintf("%d %s", c, m))
	}
	slices.Sort(out)
	return out
}
