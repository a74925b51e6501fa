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
	// What stderr says, given the per-attempt connect timeout the budget
	// implies.
	refused := func(timeout string) []string {
		return []string{"no answer from " + ep, host + " did not accept a connection within " + timeout + " (connect timeout)"}
	}
	failsWithinBudget(t, tg, []budgetCase{
		{[]string{"ls"}, defaultTimeout, refused("3.8s")},
		{[]string{"ls", "--timeout", "3s"}, 3 * time.Second, refused("380ms")},
	})
}
