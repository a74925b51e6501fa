package main

import (
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/state/backend/s3"
	"github.com/cairnhq/state/internal/testserver"
)

// fakeCredentials give a CLI run static S3 credentials, isolated from the
// user's AWS configuration, for servers that never check them.
var fakeCredentials = []string{
	"AWS_ACCESS_KEY_ID=GKtest", "AWS_SECRET_ACCESS_KEY=not-a-secret", "AWS_SESSION_TOKEN=", "AWS_PROFILE=",
	"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_EC2_METADATA_DISABLED=true",
}

// timed runs the CLI and returns what it did and how long it took.
func (tg *target) timed(t *testing.T, stdin []byte, args ...string) (result, time.Duration) {
	t.Helper()
	start := time.Now()
	r := tg.cli(t, stdin, args...)
	return r, time.Since(start)
}

// overBudget reports whether a command that took took overran its budget.
// The budget is the command's own deadline; what a process costs around it
// (starting, loading its configuration, exiting) is not in it, and a loaded
// machine stretches that cost by seconds. So the cost is measured in the
// same run, right after, as the time `version` takes, and allowed twice
// over: a command without a working budget overruns by far more (an
// unbounded one hung for 120 s, issue 16).
func overBudget(t *testing.T, tg *target, took, budget time.Duration) bool {
	t.Helper()
	_, cost := tg.timed(t, nil, "version")
	if took > budget+2*cost+500*time.Millisecond {
		t.Logf("took %v against a budget of %v; a process that does nothing took %v", took, budget, cost)
		return true
	}
	return false
}

// TestTimeout_HungEndpoint_LsFailsWithinTheBudget_NamingTheEndpoint: a
// listener that accepts and never answers made `cairn-state ls` print
// nothing for 120 s (issue 16). With the default --timeout, and with a
// short one, the command fails within the budget and names the endpoint
// and the timeout that fired.
func TestTimeout_HungEndpoint_LsFailsWithinTheBudget_NamingTheEndpoint(t *testing.T) {
	t.Parallel()
	ep := testserver.SilentEndpoint(t)
	tg := &target{dir: t.TempDir(), url: "s3://bucket/apps/one?endpoint=" + ep + "&region=garage", env: fakeCredentials}
	// What stderr says, given the per-attempt response timeout the budget
	// implies.
	hung := func(timeout string) []string {
		return []string{"no answer from " + ep + " after 3 attempts", "sent no response headers within " + timeout + " (response timeout)"}
	}
	failsWithinBudget(t, tg, []budgetCase{
		{[]string{"ls"}, defaultTimeout, hung("3.8s")},
		{[]string{"--timeout", "3s", "ls"}, 3 * time.Second, hung("380ms")},
	})
}

// budgetCase is a command run against an endpoint that does not answer:
// the budget it must fail within, and what its stderr must say.
type budgetCase struct {
	args   []string
	budget time.Duration
	want   []string
}

// failsWithinBudget runs each case as a parallel subtest named by its
// budget: the command fails, within its budget (overBudget) yet not before
// a quarter of it (its attempts use the budget), and its stderr holds
// every want.
func failsWithinBudget(t *testing.T, tg *target, cases []budgetCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.budget.String(), func(t *testing.T) {
			t.Parallel()
			r, took := tg.timed(t, nil, c.args...)
			r.must(t, exitFail)
			t.Logf("%v after %v: %s", c.args, took.Round(time.Millisecond), r.stderr)
			if overBudget(t, tg, took, c.budget) {
				t.Errorf("%v took %v, want at most %v", c.args, took, c.budget)
			}
			if took < c.budget/4 {
				t.Errorf("%v gave up after %v: want its attempts to use most of the budget (%v)", c.args, took, c.budget)
			}
			for _, want := range c.want {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, r)
				}
			}
		})
	}
}

// TestTimeout_HungEndpoint_WriteWithProbeCleanUpFailsWithinTheBudget: a
// write's first request is the conditional-write probe, whose object may
// have landed unanswered: its clean-up is one more operation on the hung
// endpoint. Both fit in the budget.
func TestTimeout_HungEndpoint_WriteWithProbeCleanUpFailsWithinTheBudget(t *testing.T) {
	t.Parallel()
	ep := testserver.SilentEndpoint(t)
	tg := &target{dir: t.TempDir(), url: "s3://bucket?endpoint=" + ep + "&region=garage", env: fakeCredentials}
	id, _ := tg.keygen(t, "id.txt")
	for _, budget := range []time.Duration{defaultTimeout, 3 * time.Second} {
		t.Run(budget.String(), func(t *testing.T) {
			t.Parallel()
			r, took := tg.timed(t, []byte("v"), "--timeout", budget.String(), "--identity", id, "put", "x")
			r.must(t, exitFail)
			t.Logf("put after %v: %s", took.Round(time.Millisecond), r.stderr)
			if overBudget(t, tg, took, budget) {
				t.Errorf("put took %v, want at most %v", took, budget)
			}
			if !strings.Contains(r.stderr, "no answer from "+ep) {
				t.Errorf("stderr does not name the endpoint:\n%s", r)
			}
		})
	}
}

// TestTimeout_URLParametersWin: what the URL sets is used as it is; the
// budget fills the rest.
func TestTimeout_URLParametersWin(t *testing.T) {
	t.Parallel()
	ep := testserver.SilentEndpoint(t)
	tg := &target{dir: t.TempDir(), url: "s3://bucket?endpoint=" + ep + "&region=garage&response_timeout=1s&max_attempts=1", env: fakeCredentials}
	r, took := tg.timed(t, nil, "--timeout", "20s", "ls")
	r.must(t, exitFail)
	if !strings.Contains(r.stderr, "sent no response headers within 1s (response timeout)") || !strings.Contains(r.stderr, "after 1 attempt:") {
		t.Errorf("the URL's response_timeout and max_attempts were not used:\n%s", r)
	}
	if overBudget(t, tg, took, 3*time.Second) {
		t.Errorf("ls took %v with one attempt of 1s", took)
	}
}

func TestTimeout_BelowOneSecond_IsAUsageError(t *testing.T) {
	tg := &target{dir: t.TempDir(), url: "file:state"}
	for _, v := range []string{"0s", "500ms", "-3s"} {
		r := tg.cli(t, nil, "--timeout", v, "ls").must(t, exitUsage)
		if !strings.Contains(r.stderr, "--timeout") || !strings.Contains(r.stderr, "at least 1s") {
			t.Errorf("--timeout %s: %s", v, r)
		}
	}
}

// TestS3Timeouts_FitTheBudget: an operation's attempts and backoffs, at
// their longest, take at most operationShare of the budget, whatever the
// number of endpoints; the URL's own values are taken into account.
func TestS3Timeouts_FitTheBudget(t *testing.T) {
	one, three, five := "http://a:1", "http://a:1,http://b:1,http://c:1", "http://a:1,http://b:1,http://c:1,http://d:1,http://e:1"
	for _, c := range []struct {
		budget      time.Duration
		endpoint    string
		maxAttempts int
		maxBackoff  time.Duration
		want        derivedTimeouts
	}{
		{30 * time.Second, one, 0, 0, derivedTimeouts{3800 * time.Millisecond, 3800 * time.Millisecond, time.Second, 3}},
		{3 * time.Second, one, 0, 0, derivedTimeouts{380 * time.Millisecond, 380 * time.Millisecond, 100 * time.Millisecond, 3}},
		{30 * time.Second, three, 0, 0, derivedTimeouts{3800 * time.Millisecond, 3800 * time.Millisecond, time.Second, 3}},
		{30 * time.Second, five, 0, 0, derivedTimeouts{1900 * time.Millisecond, 1900 * time.Millisecond, time.Second, 5}},
		{30 * time.Second, one, 1, 0, derivedTimeouts{13500 * time.Millisecond, 13500 * time.Millisecond, time.Second, 1}},
		{2 * time.Minute, "", 0, 0, derivedTimeouts{17300 * time.Millisecond, 17300 * time.Millisecond, time.Second, 3}},
		{10 * time.Second, one, 0, 10 * time.Second, derivedTimeouts{100 * time.Millisecond, 100 * time.Millisecond, 10 * time.Second, 3}},
	} {
		got := s3Timeouts(c.budget, c.endpoint, c.maxAttempts, c.maxBackoff)
		if got != c.want {
			t.Errorf("s3Timeouts(%v, %q, %d, %v) = %+v, want %+v", c.budget, c.endpoint, c.maxAttempts, c.maxBackoff, got, c.want)
		}
		worst := time.Duration(got.attempts)*max(got.connect, got.response) + time.Duration(got.attempts-1)*got.backoff
		if c.maxBackoff == 0 && float64(worst) > float64(c.budget)*operationShare {
			t.Errorf("budget %v, %q: the worst operation takes %v, more than %.0f%% of the budget", c.budget, c.endpoint, worst, operationShare*100)
		}
	}
	// The hook leaves what the URL set alone.
	o := s3.Options{Endpoint: one, ResponseTimeout: 7 * time.Second, MaxBackoff: 2 * time.Second}
	s3Budget(30 * time.Second)(&o)
	if o.ResponseTimeout != 7*time.Second || o.MaxBackoff != 2*time.Second || o.ConnectTimeout != 3100*time.Millisecond || o.AttemptTimeout != 0 || o.MaxAttempts != 0 {
		t.Errorf("after the hook: %+v", o)
	}
}
