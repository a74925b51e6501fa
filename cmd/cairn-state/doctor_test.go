package main

import (
	"fmt"
	"math"
	"net"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/state/backend/s3"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/internal/testserver"
	"github.com/cairnhq/state/testutil"
	"github.com/cairnhq/state/testutil/garage"
)

// doctorDoc is doctor's --json document as a script reads it: each
// check's facts decode into the union of every check's facts, so that the
// tests pin the field names the checks' own structs write.
type doctorDoc struct {
	Usable   bool       `json:"usable"`
	URL      string     `json:"url"`
	Failed   int        `json:"failed"`
	Warnings int        `json:"warnings"`
	Checks   []checkDoc `json:"checks"`
}

type checkDoc struct {
	Name    string `json:"name"`
	Status  string `json:"status"`
	Finding string `json:"finding"`
	Hint    string `json:"hint,omitempty"`
	Facts   *facts `json:"facts,omitempty"`
}

type facts struct {
	Backend   string   `json:"backend"`
	Directory string   `json:"directory"`
	Mode      string   `json:"mode"`
	Bucket    string   `json:"bucket"`
	Root      string   `json:"root"`
	Region    string   `json:"region"`
	Endpoint  string   `json:"endpoint"`
	Endpoints []string `json:"endpoints"`

	Conditional            string   `json:"conditional"`
	ConnectTimeoutSeconds  *float64 `json:"connect_timeout_seconds"`
	ResponseTimeoutSeconds *float64 `json:"response_timeout_seconds"`
	AttemptTimeoutSeconds  *float64 `json:"attempt_timeout_seconds"`
	MaxAttempts            int      `json:"max_attempts"`
	MaxBackoffSeconds      *float64 `json:"max_backoff_seconds"`

	ConnectSeconds    *float64 `json:"connect_seconds"`
	AnswerSeconds     *float64 `json:"answer_seconds"`
	HTTPStatus        int      `json:"http_status"`
	ErrorCode         string   `json:"error_code"`
	Error             string   `json:"error"`
	CredentialsSource string   `json:"credentials_source"`

	ProbePrefix      string `json:"probe_prefix"`
	PutConditions    *bool  `json:"put_conditions"`
	DeleteConditions *bool  `json:"delete_conditions"`
	Evidence         string `json:"evidence"`
	LockMode         string `json:"lock_mode"`

	OffsetSeconds      *float64  `json:"offset_seconds"`
	UncertaintySeconds *float64  `json:"uncertainty_seconds"`
	StorageTime        time.Time `json:"storage_time"`
	LocalTime          time.Time `json:"local_time"`

	File       string   `json:"file"`
	Identities int      `json:"identities"`
	Recipients []string `json:"recipients"`

	Object  string `json:"object"`
	StoreID string `json:"store_id"`

	Present             *bool      `json:"present"`
	Liveness            string     `json:"liveness"`
	Holder              *holderDoc `json:"holder"`
	HeartbeatAgeSeconds *float64   `json:"heartbeat_age_seconds"`
	StaleInSeconds      *float64   `json:"stale_in_seconds"`
	Epoch               *uint64    `json:"epoch"`
	NextBoot            string     `json:"next_boot"`
	Contenders          int        `json:"contenders"`
}

// doctorLineRE is one line of doctor's human output: the status, the
// check, its finding and, after " — ", what to do.
var doctorLineRE = regexp.MustCompile(`^(ok  |warn|fail|skip)  ([a-z-]+): (\S.*?)(?: — (\S.*))?$`)

// doctor runs `cairn-state doctor --json` with extra arguments and
// environment and returns the run and its document.
func (tg *target) doctor(t *testing.T, env []string, args ...string) (result, doctorDoc) {
	t.Helper()
	r := tg.cliEnv(t, nil, env, append([]string{"doctor", "--json"}, args...)...)
	return r, decode[doctorDoc](t, r)
}

// names are the checks of a document, in order.
func (doc doctorDoc) names() []string {
	var n []string
	for _, c := range doc.Checks {
		n = append(n, c.Name)
	}
	return n
}

// only returns the one check named name, failing the test unless there is
// exactly one.
func (doc doctorDoc) only(t *testing.T, name string) checkDoc {
	t.Helper()
	var found []checkDoc
	for _, c := range doc.Checks {
		if c.Name == name {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d checks named %q in %+v", len(found), name, doc.Checks)
	}
	return found[0]
}

// wantCheck fails the test unless the check named name has status and its
// finding and hint together contain every word.
func (doc doctorDoc) wantCheck(t *testing.T, name, status string, words ...string) checkDoc {
	t.Helper()
	c := doc.only(t, name)
	if c.Status != status {
		t.Errorf("check %s: status %s, want %s: %s — %s", name, c.Status, status, c.Finding, c.Hint)
	}
	for _, w := range words {
		if !strings.Contains(c.Finding+" — "+c.Hint, w) {
			t.Errorf("check %s does not say %q: %s — %s", name, w, c.Finding, c.Hint)
		}
	}
	return c
}

// checkHumanOutput runs doctor without --json and checks that every line
// is a check in doctor's format, in the JSON document's order, and that
// the run ends as usable says.
func (tg *target) checkHumanOutput(t *testing.T, env []string, doc doctorDoc, args ...string) result {
	t.Helper()
	r := tg.cliEnv(t, nil, env, append([]string{"doctor"}, args...)...)
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if doc.Usable {
		r.must(t, exitOK)
		last := lines[len(lines)-1]
		if !strings.HasPrefix(last, "doctor: the store is usable (") {
			t.Errorf("last line %q", last)
		}
		lines = lines[:len(lines)-1]
	} else {
		r.must(t, exitFail)
		if !strings.Contains(r.stderr, "cairn-state: doctor: the store is not usable: ") {
			t.Errorf("stderr: %s", r)
		}
	}
	if len(lines) != len(doc.Checks) {
		t.Fatalf("%d lines for %d checks:\n%s", len(lines), len(doc.Checks), r.stdout)
	}
	for i, line := range lines {
		m := doctorLineRE.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("line %q is not in doctor's format", line)
			continue
		}
		m[1] = strings.TrimSpace(m[1])
		if c := doc.Checks[i]; m[1] != c.Status || m[2] != c.Name {
			t.Errorf("line %d is %s %s, the JSON document's check %s %s", i, m[1], m[2], c.Status, c.Name)
		}
		if (m[1] == statusFail || m[1] == statusWarn) && m[4] == "" {
			t.Errorf("line %q says what is wrong but not what to do", line)
		}
	}
	return r
}

func TestDoctor_HealthyStore_EveryCheckOK_OnFsVersitygwAndGarage(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		id, recipient := tg.keygen(t, "id.txt")
		env := []string{"CAIRN_STATE_IDENTITY=" + id}
		tg.cliEnv(t, nil, env, "init").must(t, exitOK)
		tg.cliEnv(t, []byte("hunter2"), env, "put", "app/db-password").must(t, exitOK)
		before := tg.cli(t, nil, "ls", "--all", "--json").must(t, exitOK).stdout

		r, doc := tg.doctor(t, env)
		r.must(t, exitOK)
		t.Logf("doctor on %s:\n%s", tg.name, tg.checkHumanOutput(t, env, doc).stdout)
		if !doc.Usable || doc.Failed != 0 {
			t.Errorf("usable %v, failed %d", doc.Usable, doc.Failed)
		}
		want := []string{checkURL, checkEndpoint, checkCredentials, checkRegion, checkBucket, checkConditional, checkLockMode, checkClock, checkIdentity, checkMembership, checkStoreMode, checkRekey, checkHistory, checkLock}
		mode := "compare-and-swap"
		switch tg.name {
		case "fs":
			want = []string{checkURL, checkDirectory, checkConditional, checkLockMode, checkClock, checkIdentity, checkMembership, checkStoreMode, checkRekey, checkHistory, checkLock}
		case "garage":
			want = slices.Insert(want, slices.Index(want, checkClock), checkListConsistency)
			mode = "claims"
		}
		if !slices.Equal(doc.names(), want) {
			t.Fatalf("checks %v, want %v", doc.names(), want)
		}
		for _, c := range doc.Checks {
			if c.Status != statusOK && !(c.Name == checkListConsistency && c.Status == statusWarn) {
				t.Errorf("%s %s: %s — %s", c.Status, c.Name, c.Finding, c.Hint)
			}
		}
		if got := doc.only(t, checkLockMode).Facts.LockMode; got != mode {
			t.Errorf("lock mode %q, want %q", got, mode)
		}
		if tg.name != "fs" {
			opts, _, err := s3.ParseURL(tg.url)
			if err != nil {
				t.Fatal(err)
			}
			if ep := doc.only(t, checkEndpoint).Facts; ep.Endpoint != opts.Endpoint || ep.HTTPStatus != 200 {
				t.Errorf("endpoint facts %+v, want %s answering 200", ep, opts.Endpoint)
			}
			probe := doc.wantCheck(t, checkConditional, statusOK, "a probe object was written and removed").Facts
			if probe.Evidence == "" || probe.PutConditions == nil || *probe.PutConditions != (tg.name == "versitygw") {
				t.Errorf("probe facts %+v", probe)
			}
			if tg.name == "garage" {
				doc.wantCheck(t, checkListConsistency, statusWarn, `consistency_mode = "consistent"`, "cannot read the server's configuration")
			}
			clock := doc.only(t, checkClock).Facts
			if clock.OffsetSeconds == nil || math.Abs(*clock.OffsetSeconds) > 2 || clock.StorageTime.IsZero() {
				t.Errorf("clock facts %+v", clock)
			}
		}
		if f := doc.only(t, checkIdentity).Facts; f.Mode != "0600" || !slices.Equal(f.Recipients, []string{recipient}) {
			t.Errorf("identity facts %+v", f)
		}
		// The store's manifest, naming its id and how to pin it.
		if c := doc.wantCheck(t, checkMembership, statusOK, "the identity opens the store: store id", "--store-id"); c.Facts.Object != ".cairn-state/.store" || c.Facts.StoreID == "" || c.Facts.LockMode != mode {
			t.Errorf("membership facts %+v", c.Facts)
		}
		// The mode the store recorded, which the storage still has.
		if c := doc.wantCheck(t, checkStoreMode, statusOK, "the store's lock mode is "+mode, "still behaves so"); c.Facts.LockMode != mode || c.Facts.Evidence == "" {
			t.Errorf("store lock mode facts %+v", c.Facts)
		}
		doc.wantCheck(t, checkLock, statusOK, "not held")

		// Doctor left nothing behind.
		if after := tg.cli(t, nil, "ls", "--all", "--json").must(t, exitOK).stdout; after != before {
			t.Errorf("the store changed under doctor:\nbefore %s\nafter %s", before, after)
		}
	})
}

func TestDoctor_WrongRegion_FailsTheRegionLine_Exit1(t *testing.T) {
	testkit.EachS3Server(t, func(t *testing.T, srv *testutil.S3Server) {
		bucket := srv.NewBucket(t)
		tg := &target{dir: t.TempDir(), env: srv.Env(),
			url: fmt.Sprintf("s3://%s/apps/one?endpoint=%s&region=eu-west-9", bucket, srv.Endpoint)}
		r, doc := tg.doctor(t, nil)
		r.must(t, exitFail)
		tg.checkHumanOutput(t, nil, doc)
		assertNoCredentials(t, r, srv)
		doc.wantCheck(t, checkEndpoint, statusOK, "HTTP 400")
		doc.wantCheck(t, checkRegion, statusFail, `"eu-west-9"`, "set region= in the URL")
		doc.wantCheck(t, checkBucket, statusSkip)
		if doc.Usable || doc.Failed != 1 {
			t.Errorf("usable %v, failed %d", doc.Usable, doc.Failed)
		}
	})
}

func TestDoctor_WrongCredentials_FailsTheCredentialsLine_Exit1(t *testing.T) {
	testkit.EachS3Server(t, func(t *testing.T, srv *testutil.S3Server) {
		tg := &target{dir: t.TempDir(), env: srv.Env(), url: srv.URL(srv.NewBucket(t), "apps/one")}
		for _, c := range []struct {
			name string
			env  []string
			hint string
		}{
			{"wrong secret", []string{"AWS_SECRET_ACCESS_KEY=" + strings.Repeat("0", 64)}, "AWS_SECRET_ACCESS_KEY"},
			{"unknown access key", []string{"AWS_ACCESS_KEY_ID=GK0123456789abcdef01234567"}, "AWS_ACCESS_KEY_ID"},
			{"none", []string{"AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY="}, "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"},
		} {
			t.Run(c.name, func(t *testing.T) {
				r, doc := tg.doctor(t, c.env)
				r.must(t, exitFail)
				tg.checkHumanOutput(t, c.env, doc)
				assertNoCredentials(t, r, srv)
				doc.wantCheck(t, checkCredentials, statusFail, c.hint)
				doc.wantCheck(t, checkRegion, statusSkip)
				doc.wantCheck(t, checkBucket, statusSkip)
				doc.wantCheck(t, checkConditional, statusSkip)
			})
		}
	})
}

func TestDoctor_MissingBucket_FailsTheBucketLine_Exit1(t *testing.T) {
	testkit.EachS3Server(t, func(t *testing.T, srv *testutil.S3Server) {
		tg := &target{dir: t.TempDir(), env: srv.Env(), url: srv.URL("cairn-no-such-bucket", "")}
		r, doc := tg.doctor(t, nil)
		r.must(t, exitFail)
		tg.checkHumanOutput(t, nil, doc)
		doc.wantCheck(t, checkCredentials, statusOK)
		doc.wantCheck(t, checkRegion, statusOK)
		doc.wantCheck(t, checkBucket, statusFail, `"cairn-no-such-bucket" does not exist`, "create it")
		doc.wantCheck(t, checkConditional, statusSkip)
	})
}

// TestDoctor_HungEndpoint_FailsWithinTheTimeout_NamingIt: a listener that
// accepts and never answers; doctor ends within its --timeout, the
// endpoint line naming it and the timeout that fired.
func TestDoctor_HungEndpoint_FailsWithinTheTimeout_NamingIt(t *testing.T) {
	t.Parallel()
	ep := testserver.SilentEndpoint(t)
	tg := &target{dir: t.TempDir(), env: fakeCredentials, url: "s3://bucket?endpoint=" + ep + "&region=garage"}
	for _, c := range []struct {
		args   []string
		budget time.Duration
	}{
		{nil, defaultTimeout},
		{[]string{"--timeout", "3s"}, 3 * time.Second},
	} {
		t.Run(c.budget.String(), func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			r, doc := tg.doctor(t, nil, c.args...)
			took := time.Since(start)
			r.must(t, exitFail)
			if overBudget(t, tg, took, c.budget) {
				t.Errorf("doctor took %v, want at most %v", took, c.budget)
			}
			doc.wantCheck(t, checkEndpoint, statusFail, ep, "did not answer", "(response timeout)", "hung")
			for _, name := range []string{checkCredentials, checkConditional, checkClock, checkLock} {
				doc.wantCheck(t, name, statusSkip, "no endpoint answered")
			}
		})
	}
}

// TestDoctor_SeveralEndpoints_OneDown_WarnsAndStaysUsable: requests fail
// over to the endpoints that answer, so one node down is a warning; all
// down is a failure.
func TestDoctor_SeveralEndpoints_OneDown_WarnsAndStaysUsable(t *testing.T) {
	srv := garage.Start(t)
	bucket := srv.NewBucket(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + l.Addr().String()
	l.Close() // nothing listens there now: connection refused
	tg := &target{dir: t.TempDir(), env: srv.Env(),
		url: fmt.Sprintf("s3://%s?endpoint=%s,%s&region=%s", bucket, srv.Endpoint, down, srv.Region)}
	r, doc := tg.doctor(t, nil)
	r.must(t, exitOK)
	tg.checkHumanOutput(t, nil, doc)
	var lines []checkDoc
	for _, c := range doc.Checks {
		if c.Name == checkEndpoint {
			lines = append(lines, c)
		}
	}
	if len(lines) != 2 || lines[0].Status != statusOK || lines[1].Status != statusWarn ||
		!strings.Contains(lines[1].Finding, down+" refused the connection") || !strings.Contains(lines[1].Hint, "fail over") {
		t.Errorf("endpoint lines: %+v", lines)
	}
	doc.wantCheck(t, checkBucket, statusOK)

	tg.url = fmt.Sprintf("s3://%s?endpoint=%s,%s&region=%s", bucket, down, testserver.SilentEndpoint(t), srv.Region)
	r, doc = tg.doctor(t, nil, "--timeout", "5s")
	r.must(t, exitFail)
	for _, c := range doc.Checks {
		if c.Name == checkEndpoint && c.Status != statusFail {
			t.Errorf("with no endpoint answering: %+v", c)
		}
	}
}

// TestDoctor_ConditionalOnAgainstGarage_Fails: a URL that forces
// compare-and-swap on a server that ignores the conditions would let two
// instances hold the lock; the probe says so.
func TestDoctor_ConditionalOnAgainstGarage_Fails(t *testing.T) {
	srv := garage.Start(t)
	tg := &target{dir: t.TempDir(), env: srv.Env(),
		url: fmt.Sprintf("s3://%s?endpoint=%s&region=%s&conditional=on", srv.NewBucket(t), srv.Endpoint, srv.Region)}
	r, doc := tg.doctor(t, nil)
	r.must(t, exitFail)
	doc.wantCheck(t, checkConditional, statusFail, "conditional=on in the URL, but the server does not enforce them", "remove conditional=on")
	if f := doc.only(t, checkLockMode).Facts; f.LockMode != "compare-and-swap" {
		t.Errorf("lock mode %q: with conditional=on the lock would use compare-and-swap", f.LockMode)
	}
}

// TestDoctor_NeverAcceptingEndpoint_NamesTheConnectTimeout: a listener
// whose backlog is full never accepts; the endpoint line names the connect
// timeout that gave it up (the dialer's own deadline and the timeout's
// context fire at the same instant: either is the connect timeout).
func TestDoctor_NeverAcceptingEndpoint_NamesTheConnectTimeout(t *testing.T) {
	t.Parallel()
	ep := testserver.NeverAcceptingEndpoint(t)
	tg := &target{dir: t.TempDir(), env: fakeCredentials, url: "s3://bucket?endpoint=" + ep + "&region=garage"}
	for range 3 {
		r, doc := tg.doctor(t, nil, "--timeout", "3s")
		r.must(t, exitFail)
		doc.wantCheck(t, checkEndpoint, statusFail, ep, "did not accept a connection within 380ms (connect timeout)", "firewall")
		doc.wantCheck(t, checkCredentials, statusSkip, "no endpoint answered")
	}
}
