package s3

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/cairnhq/state/backend"
)

// mapErr turns an SDK error into the backend's vocabulary, naming the
// operation, key and bucket. conditional tells whether the call carried
// If-Match or If-None-Match: a missing key then fails the condition rather
// than being "not found". A 403 (access denied, an unknown key, a wrong
// secret) matches backend.ErrPermission. Context errors are returned
// unchanged.
func (b *s3Backend) mapErr(ctx context.Context, op, key string, conditional bool, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
		return ctxErr
	}
	where := fmt.Sprintf("s3: %s %q in bucket %q", op, key, b.bucket)
	if key == "" {
		where = fmt.Sprintf("s3: %s bucket %q", op, b.bucket)
	}
	code, status := errorCode(err)
	switch {
	case code == "NoSuchBucket":
		// Deliberately not ErrNotFound: a missing bucket is a
		// configuration error, not a missing object.
		return fmt.Errorf("%s: the bucket does not exist: %w", where, err)
	case code == "NoSuchKey" || (status == http.StatusNotFound && code == "NotFound"):
		if conditional {
			return fmt.Errorf("%s: the object does not exist: %w: %w", where, backend.ErrPreconditionFailed, err)
		}
		return fmt.Errorf("%s: %w: %w", where, backend.ErrNotFound, err)
	case code == "PreconditionFailed" || status == http.StatusPreconditionFailed:
		return fmt.Errorf("%s: %w: %w", where, backend.ErrPreconditionFailed, err)
	case code == "ConditionalRequestConflict":
		// Retried by the SDK already (see New); the caller rereads and
		// decides, exactly as after losing a compare-and-swap.
		return fmt.Errorf("%s: a concurrent conditional write kept conflicting: %w: %w", where, backend.ErrPreconditionFailed, err)
	case conditional && (code == "NotImplemented" || status == http.StatusNotImplemented):
		return fmt.Errorf("%s: the server does not implement conditional writes: %w: %w", where, backend.ErrUnsupported, err)
	}
	if status == http.StatusForbidden {
		// Access denied, an unknown access key, a wrong secret: asking
		// again with the same credentials cannot succeed.
		err = permissionError{err}
	}
	if hint := hints[code]; hint != "" {
		return fmt.Errorf("%s (%s): %w", where, hint, err)
	}
	return fmt.Errorf("%s: %w", where, err)
}

// permissionError is err, also matching backend.ErrPermission.
type permissionError struct{ err error }

func (e permissionError) Error() string   { return e.err.Error() }
func (e permissionError) Unwrap() []error { return []error{backend.ErrPermission, e.err} }

// hints are what to check for configuration errors that the server's own
// message does not make obvious.
var hints = map[string]string{
	"AuthorizationHeaderMalformed": "the region does not match the server's; set region= in the URL (Garage wants its s3_region, often \"garage\")",
	"InvalidAccessKeyId":           "the server does not know this access key; check AWS_ACCESS_KEY_ID or the profile",
	"SignatureDoesNotMatch":        "the secret key does not match the access key; check AWS_SECRET_ACCESS_KEY or the profile",
	"AccessDenied":                 "wrong credentials (check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or the profile), or they may not use this bucket or prefix",
	"PermanentRedirect":            "the bucket is in another region; set region= in the URL",
}

// errorCode extracts the S3 error code and HTTP status from an SDK error;
// either may be zero.
func errorCode(err error) (code string, status int) {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		code = apiErr.ErrorCode()
	}
	var respErr *smithyhttp.ResponseError
	if errors.As(err, &respErr) {
		status = respErr.HTTPStatusCode()
	}
	return code, status
}
