// Package testutil is what the real storage servers of
// [github.com/cairnhq/state/testutil/garage] and
// [github.com/cairnhq/state/testutil/versitygw] offer a test ([S3Server]),
// skipping or failing when a server is missing ([RequireServer]), and
// endpoints that never answer, for timeout tests.
//
// # Missing servers
//
// A test that needs a server whose binary cannot be found is skipped with a
// message saying how to install it, unless the environment variable
// CAIRN_REQUIRE_SERVERS=1 is set (make test and CI set it): then it fails,
// so that a green CI run cannot hide a skipped server.
package testutil

import (
	"fmt"
	"os"
	"testing"
)

// RequireServersEnv is the environment variable that turns a missing
// server from a skip into a failure when set to "1".
const RequireServersEnv = "CAIRN_REQUIRE_SERVERS"

// RequireServer is called when the server called name is not available:
// it skips the test with howto (how to get the server), or fails it when
// CAIRN_REQUIRE_SERVERS=1. It does not return.
func RequireServer(t testing.TB, name, howto string) {
	t.Helper()
	msg := fmt.Sprintf("%s is not available: %s", name, howto)
	if os.Getenv(RequireServersEnv) == "1" {
		t.Fatalf("%s (%s=1, so this fails instead of skipping)", msg, RequireServersEnv)
	}
	t.Skip(msg)
}
