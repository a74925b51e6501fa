package s3

import (
	"errors"
	"testing"

	"github.com/cairnhq/state/internal/s3diag"
)

// The refusals the servers' codes map to, in ADR 0025's order: a region
// error first, then the request's time, the credentials, the bucket.
func TestRefusalOf_TellsTheCodesApart(t *testing.T) {
	refused := errors.New("refused")
	for _, c := range []struct {
		status int
		code   string
		err    error
		want   string
	}{
		{200, "", nil, ""},
		{400, "AuthorizationHeaderMalformed", refused, "region"}, // Garage and versitygw
		{301, "PermanentRedirect", refused, "region"},
		{400, "InvalidRegion", refused, "region"},
		{403, "RequestTimeTooSkewed", refused, "time"},
		{403, "InvalidAccessKeyId", refused, "access-key"},
		{404, "XAdminUserNotFound", refused, "access-key"}, // versitygw
		{403, "SignatureDoesNotMatch", refused, "secret"},
		{403, "AccessDenied", refused, "denied"}, // Garage: unknown key and wrong secret
		{403, "", refused, "denied"},             // a HEAD's bodiless 403
		{400, "ExpiredToken", refused, "credentials"},
		{403, "SomethingElse", refused, "credentials"},
		{403, "NoSuchBucket", refused, "credentials"}, // a 403 is about the credentials
		{404, "NoSuchBucket", refused, "bucket"},
		{400, "InvalidArgument", refused, "listing"},
		{404, "", refused, "listing"},
	} {
		r := &s3diag.EndpointCheck{Sent: true, Status: c.status, Code: c.code, Err: c.err}
		if got := refusalOf(r); got != c.want {
			t.Errorf("%d %q: refusal %q, want %q", c.status, c.code, got, c.want)
		}
	}
}
