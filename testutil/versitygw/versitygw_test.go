package versitygw_test

import (
	"testing"

	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/testutil/versitygw"
)

func TestStart_ServesBucketsThroughBackendAndOracle(t *testing.T) {
	b := testkit.RoundTrip(t, &versitygw.Start(t).S3Server)
	if !b.Capabilities().ConditionalWrites {
		t.Errorf("versitygw %s: probe found no conditional writes; it enforces them", versitygw.Version)
	}
}
