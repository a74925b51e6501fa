//go:build linux

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/state/internal/testserver"
)

// TestTimeout_NeverAcceptingEndpoint_LsFailsWithinTheBudget_NamingIt: the
// connect timeout, derived from the budget, gives up on a listener that
// never accepts.
func TestTimeout_NeverAcceptingEndpoint_LsFailsWithinTheBudget_NamingIt(t *testing.T) {
	t.Parallel()
	ep := testserver.NeverAcceptingEndpoint(t)
	host := strings.TrimPrefix(ep, "http://")
	tg := &target{dir: t.TempDir(), url: "s3://bucket?endpoint=" + ep + "&region=garage", env: fakeCredentials}
	for _, c := range []struct {
		args    []string
		budget  time.Duration
		timeout string
	}{
		{[]string{"ls"}, defaultTimeout, "3.8s"},
		{[]string{"ls", "--timeout", "3s"}, 3 * time.Second, "380ms"},
	} {
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
			for _, want := range []string{"no answer from " + ep, host + " did not accept a connection within " + c.timeout + " (connect timeout)"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, r)
				}
			}
		})
	}
}
