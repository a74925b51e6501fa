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
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/testutil"
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
	mostRequests := map[string]int{"versitygw": 7, "garage": 10}
	for _, s := range testkit.S3Servers {
		t.Run(s.Name, func(t *testing.T) {
			most, ok := mostRequests[s.Name]
			if !ok {
				t.Fatalf("no request bound for server %s", s.Name)
			}
			tg, p := proxiedTarget(t, s.Name, s.Start(t))
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
			t.Logf("%s: creating the store: %d requests", s.Name, len(created))
			for _, put := range []string{"a new name", "an overwrite"} {
				tg.cliEnv(t, nil, env, "put", "app/value", value).must(t, exitOK)
				got := p.take()
				t.Logf("%s: one put (%s) on the existing store: %d requests: %s\n%s", s.Name, put, len(got), strings.Join(summarize(got), ", "), strings.Join(got, "\n"))
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
				if len(got) > most {
					t.Errorf("a put (%s) on %s took %d requests, want at most %d:\n%s", put, s.Name, len(got), most, strings.Join(got, "\n"))
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
