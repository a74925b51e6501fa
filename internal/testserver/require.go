package testserver

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
// CAIRN_REQUIRE_SERVERS=1 (testutil's package doc). It does not return.
func RequireServer(t testing.TB, name, howto string) {
	t.Helper()
	msg := fmt.Sprintf("%s is not available: %s", name, howto)
	if os.Getenv(RequireServersEnv) == "1" {
		t.Fatalf("%s (%s=1, so this fails instead of skipping)", msg, RequireServersEnv)
	}
	t.Skip(msg)
}
