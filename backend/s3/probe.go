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
	// Supported is true when every condition was enforced: the backend
	// then reports conditional writes.
	Supported bool
	// PutConditions is true when PutObject enforced If-None-Match: * and
	// If-Match (a false condition failed with 412 and wrote nothing, a
	// true one succeeded).
	PutConditions bool
	// DeleteConditions is true when DeleteObject enforced If-Match.
	DeleteConditions bool
	// Evidence says, in a sentence per finding, what the server did: for
	// each condition it ignored or refused, how.
	Evidence string
}

func (b *Backend) isProbeKey(key string) bool {
	return strings.HasPrefix(key, b.probePrefix+probeKeyPart)
}

// condOutcome classifies a conditional request whose condition was false.
type condOutcome int

const (
	enforced condOutcome = iota // 412, nothing changed
	ignored                     // 2xx: the request was carried out
	refused                     // 400/501: the header is not implemented
)

// Probe checks, on a throwaway object, that the server enforces every
// condition the backend relies on, in both directions: a false condition
// must fail with 412 and change nothing, a true one must succeed. It
// checks PutObject's If-None-Match and If-Match and DeleteObject's
// If-Match separately and reports each (MinIO, for one, enforces the first
// two and ignores the third); the backend uses conditional writes only if
// all hold. A server that ignores a header (Garage answers 200 and
// overwrites) or refuses it (400/501) fails that check; transport,
// permission and bucket errors fail the probe, since the backend could not
// work anyway. New runs it under ConditionalAuto; calling it again reports
// the server's behaviour now without changing the backend's Capabilities.
// The probe object is removed afterwards and hidden from List meanwhile.
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
	// classify sorts the answer to a request whose condition was false.
	classify := func(step string, err error) (condOutcome, string, error) {
		if err == nil {
			return ignored, step + " was carried out (header ignored)", nil
		}
		if why, ok := conditionRefused(err); ok {
			return refused, step + " was refused: " + why, nil
		}
		if isPreconditionFailed(err) {
			return enforced, "", nil
		}
		return 0, "", err
	}
	var evidence []string
	putOK, delOK := true, true

	// The object the conditions are tested against; content and ETag
	// track every write the server carried out.
	out, err := put("probe 1", nil, nil)
	if err != nil {
		return fail("create the probe object", err)
	}
	content, etag := "probe 1", out.ETag

	// PutObject with If-None-Match: * on an existing object must fail.
	out, err = put("probe 2", aws.String("*"), nil)
	switch o, why, err := classify("PutObject with If-None-Match: * on an existing object", err); {
	case err != nil:
		return fail("If-None-Match on an existing object", err)
	case o != enforced:
		putOK, evidence = false, append(evidence, why)
		if o == ignored {
			content, etag = "probe 2", out.ETag
		}
	}

	// PutObject with If-Match: another ETag must fail.
	out, err = put("probe 3", nil, aws.String(wrongETag))
	switch o, why, err := classify("PutObject with a non-matching If-Match", err); {
	case err != nil:
		return fail("If-Match with a wrong ETag", err)
	case o != enforced:
		putOK, evidence = false, append(evidence, why)
		if o == ignored {
			content, etag = "probe 3", out.ETag
		}
	}

	// PutObject with If-Match: the current ETag must succeed.
	out, err = put("probe 4", nil, etag)
	switch {
	case err == nil:
		content, etag = "probe 4", out.ETag
	case isPreconditionFailed(err):
		putOK, evidence = false, append(evidence, "PutObject with the object's own ETag in If-Match failed with 412")
	default:
		if why, ok := conditionRefused(err); ok {
			putOK, evidence = false, append(evidence, "PutObject with a matching If-Match was refused: "+why)
			break
		}
		return fail("If-Match with the current ETag", err)
	}

	// Nothing refused may have written: the object holds the last write
	// the server carried out.
	got, err := b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &b.bucket, Key: &key})
	if err != nil {
		return fail("read back the probe object", err)
	}
	data, err := io.ReadAll(got.Body)
	got.Body.Close()
	if err != nil {
		return fail("read back the probe object", err)
	}
	if !bytes.Equal(data, []byte(content)) {
		putOK, evidence = false, append(evidence, fmt.Sprintf("a refused conditional write changed the object anyway (read %q, want %q)", data, content))
	}

	// DeleteObject with If-Match: another ETag must fail.
	_, err = b.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &b.bucket, Key: &key, IfMatch: aws.String(wrongETag)})
	switch o, why, err := classify("DeleteObject with a non-matching If-Match", err); {
	case err != nil:
		return fail("conditional delete with a wrong ETag", err)
	case o != enforced:
		delOK, evidence = false, append(evidence, why)
	}

	// DeleteObject with If-Match: the current ETag must succeed (when the
	// object is still there to delete).
	if delOK {
		_, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &b.bucket, Key: &key, IfMatch: etag})
		switch {
		case err == nil:
		case isPreconditionFailed(err):
			delOK, evidence = false, append(evidence, "DeleteObject with the object's own ETag in If-Match failed with 412")
		default:
			if why, ok := conditionRefused(err); ok {
				delOK, evidence = false, append(evidence, "DeleteObject with a matching If-Match was refused: "+why)
				break
			}
			return fail("conditional delete with the current ETag", err)
		}
	}

	res := ProbeResult{Supported: putOK && delOK, PutConditions: putOK, DeleteConditions: delOK}
	if res.Supported {
		res.Evidence = "If-None-Match and If-Match enforced on PutObject, If-Match on DeleteObject"
	} else {
		res.Evidence = strings.Join(evidence, "; ")
	}
	return res, nil
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
