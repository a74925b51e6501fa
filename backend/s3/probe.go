package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/uuid"
)

// probeKeyPart marks the probe's throwaway objects below the probe prefix.
const probeKeyPart = ".probe-"

// wrongETag is a well-formed ETag that no object of the probe can have (the
// MD5 of the probe's payloads is never all zeros).
const wrongETag = `"00000000000000000000000000000000"`

// ProbeResult is what a conditional-write probe found.
type ProbeResult struct {
	// Supported is true when every condition was enforced.
	Supported bool
	// Evidence says, in a sentence, which step decided: for a server
	// without support, the first condition it ignored or refused.
	Evidence string
}

func (b *Backend) isProbeKey(key string) bool {
	return strings.HasPrefix(key, b.probePrefix+probeKeyPart)
}

// Probe checks, on a throwaway object, that the server enforces every
// condition the backend relies on, in both directions: a false condition
// must fail with 412 and change nothing, a true one must succeed. A server
// that ignores a header (Garage answers 200 and overwrites) or refuses it
// (400/501) is reported as unsupported; transport, permission and bucket
// errors fail the probe, since the backend could not work anyway. New runs
// it under ConditionalAuto; calling it again reports the server's behaviour
// now without changing the backend's Capabilities. The probe object is
// removed afterwards and hidden from List meanwhile.
func (b *Backend) Probe(ctx context.Context) (ProbeResult, error) {
	key := b.probePrefix + probeKeyPart + uuid.NewString()
	fail := func(step string, err error) (ProbeResult, error) {
		return ProbeResult{}, fmt.Errorf("s3: conditional-write probe (%s): %w", step, b.mapErr(ctx, "probe", key, false, err))
	}
	defer func() {
		// Remove the probe object even if ctx was cancelled mid-probe.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := b.client.DeleteObject(cctx, &s3.DeleteObjectInput{Bucket: &b.bucket, Key: &key}); err != nil {
			b.log.WarnContext(ctx, "s3 backend: could not remove the probe object; it is hidden from listings and can be deleted by hand",
				"bucket", b.bucket, "key", key, "error", err)
		}
	}()
	put := func(data string, ifNoneMatch, ifMatch *string) (*s3.PutObjectOutput, error) {
		return b.client.PutObject(ctx, &s3.PutObjectInput{
			Bucket: &b.bucket, Key: &key,
			Body: strings.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
			IfNoneMatch: ifNoneMatch, IfMatch: ifMatch,
		})
	}
	no := func(evidence string) (ProbeResult, error) { return ProbeResult{Evidence: evidence}, nil }

	// 1. The object the conditions are tested against.
	v1, err := put("probe 1", nil, nil)
	if err != nil {
		return fail("create the probe object", err)
	}

	// 2. If-None-Match: * on an existing object must fail.
	_, err = put("probe 2", aws.String("*"), nil)
	switch refused, ok := conditionRefused(err); {
	case err == nil:
		return no("PutObject with If-None-Match: * overwrote an existing object (header ignored)")
	case ok:
		return no("PutObject with If-None-Match: * was refused: " + refused)
	case !isPreconditionFailed(err):
		return fail("If-None-Match on an existing object", err)
	}

	// 3. If-Match with another ETag must fail.
	_, err = put("probe 3", nil, aws.String(wrongETag))
	switch refused, ok := conditionRefused(err); {
	case err == nil:
		return no("PutObject with a non-matching If-Match overwrote the object (header ignored)")
	case ok:
		return no("PutObject with If-Match was refused: " + refused)
	case !isPreconditionFailed(err):
		return fail("If-Match with a wrong ETag", err)
	}

	// 4. If-Match with the current ETag must succeed.
	v2, err := put("probe 4", nil, v1.ETag)
	if err != nil {
		if refused, ok := conditionRefused(err); ok {
			return no("PutObject with a matching If-Match was refused: " + refused)
		}
		if isPreconditionFailed(err) {
			return no("PutObject with the object's own ETag in If-Match failed with 412")
		}
		return fail("If-Match with the current ETag", err)
	}

	// 5. DeleteObject with another ETag must fail.
	_, err = b.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &b.bucket, Key: &key, IfMatch: aws.String(wrongETag)})
	switch refused, ok := conditionRefused(err); {
	case err == nil:
		// Some servers answer 204 without deleting; the read below
		// would tell, but either way the condition was not enforced.
		return no("DeleteObject with a non-matching If-Match answered success (header ignored)")
	case ok:
		return no("DeleteObject with If-Match was refused: " + refused)
	case !isPreconditionFailed(err):
		return fail("conditional delete with a wrong ETag", err)
	}

	// 6. Nothing that failed may have written: the object is step 4's.
	got, err := b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &b.bucket, Key: &key})
	if err != nil {
		return fail("read back the probe object", err)
	}
	data, err := io.ReadAll(got.Body)
	got.Body.Close()
	if err != nil {
		return fail("read back the probe object", err)
	}
	if !bytes.Equal(data, []byte("probe 4")) {
		return no(fmt.Sprintf("a refused conditional write changed the object anyway (read %q, want %q)", data, "probe 4"))
	}

	// 7. DeleteObject with the current ETag must succeed.
	if _, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &b.bucket, Key: &key, IfMatch: v2.ETag}); err != nil {
		if refused, ok := conditionRefused(err); ok {
			return no("DeleteObject with a matching If-Match was refused: " + refused)
		}
		if isPreconditionFailed(err) {
			return no("DeleteObject with the object's own ETag in If-Match failed with 412")
		}
		return fail("conditional delete with the current ETag", err)
	}
	return ProbeResult{Supported: true, Evidence: "If-None-Match and If-Match enforced on PutObject, If-Match on DeleteObject"}, nil
}

func isPreconditionFailed(err error) bool {
	code, status := errorCode(err)
	return code == "PreconditionFailed" || status == http.StatusPreconditionFailed
}

// conditionRefused reports whether err is the server refusing a
// conditional header it does not implement (501, or 400 naming the
// header), with a description for the log.
func conditionRefused(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	code, status := errorCode(err)
	if status == http.StatusNotImplemented || code == "NotImplemented" {
		return fmt.Sprintf("%d %s", status, code), true
	}
	if status == http.StatusBadRequest && code != "" && !errors.Is(err, context.Canceled) {
		return fmt.Sprintf("%d %s", status, code), true
	}
	return "", false
}
