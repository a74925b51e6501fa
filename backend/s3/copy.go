package s3

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/driver"
	"github.com/cairnhq/state/internal/s3diag"
)

var _ backend.Copier = (*s3Backend)(nil)

// Copy implements backend.Copier with CopyObject: the server copies the
// object, the bytes never pass through this process. The copy's ETag is
// the MD5 of the bytes, like a PutObject's, so it equals the source's
// (versions are content-addressed; see the package doc). The returned
// Object has Size -1 (CopyObject does not say), ModTime the copy's
// Last-Modified, Now the response's Date.
//
// IfSourceVersion is sent as x-amz-copy-source-if-match and IfAbsent as
// If-None-Match: * on the copy. Servers differ here: versitygw v1.8.0 and
// Garage 2.5.0 enforce the first and ignore the second (docs/adr/0041), so
// under ConditionalAuto each condition is used only once the copy probe
// that s3Backend.ResolveCapabilities runs has seen the server enforce it
// (ProbeCopy); until then, and for a condition it did not
// enforce, a conditional copy fails with backend.ErrUnsupported, copying
// nothing. ConditionalOn trusts the server with both (AWS S3 enforces
// both); ConditionalOff refuses both.
//
// A copy is retried like every request (ADR 0016). A copy conditional on
// the source's version is idempotent; an if-absent copy whose answer was
// lost fails its retry with ErrPreconditionFailed, as an if-absent Put
// does.
func (b *s3Backend) Copy(ctx context.Context, srcKey, dstKey string, opts backend.CopyOptions) (backend.Object, error) {
	if err := driver.CheckCopy(ctx, srcKey, dstKey); err != nil {
		return backend.Object{}, err
	}
	op := "copy " + strconv.Quote(srcKey) + " to"
	if err := b.usable(op, dstKey); err != nil {
		return backend.Object{}, err
	}
	in := &s3.CopyObjectInput{Bucket: &b.bucket, Key: &dstKey, CopySource: aws.String(copySource(b.bucket, srcKey))}
	if opts.IfSourceVersion != "" {
		if err := b.copyAllowed(op, dstKey, "x-amz-copy-source-if-match", func(r s3diag.CopyProbeResult) bool { return r.SourceConditions }); err != nil {
			return backend.Object{}, err
		}
		in.CopySourceIfMatch = aws.String(opts.IfSourceVersion)
		op = "copy " + strconv.Quote(srcKey) + " if version " + opts.IfSourceVersion + " to"
	}
	if opts.IfAbsent {
		if err := b.copyAllowed(op, dstKey, "If-None-Match", func(r s3diag.CopyProbeResult) bool { return r.DestinationConditions }); err != nil {
			return backend.Object{}, err
		}
		in.IfNoneMatch = aws.String("*")
		op += " (if absent)"
	}
	var out *s3.CopyObjectOutput
	// A missing source fails a source condition; with no source condition
	// it is "not found", whatever the destination's condition.
	err := b.call(ctx, op, dstKey, opts.IfSourceVersion != "", func(ctx context.Context, ep func(*s3.Options)) (err error) {
		out, err = b.client.CopyObject(ctx, in, ep)
		return err
	})
	if err != nil {
		return backend.Object{}, err
	}
	now, _ := awsmiddleware.GetServerTime(out.ResultMetadata)
	obj := backend.Object{Key: dstKey, Size: -1, ModTime: now, Now: now}
	if r := out.CopyObjectResult; r != nil {
		obj.Version = aws.ToString(r.ETag)
		if r.LastModified != nil {
			obj.ModTime = *r.LastModified
		}
	}
	if obj.Version == "" {
		return backend.Object{}, fmt.Errorf("s3: %s %q in bucket %q: the server's answer carries no ETag", op, dstKey, b.bucket)
	}
	return obj, nil
}

// copySource is the x-amz-copy-source header for key in bucket: every byte
// of the key percent-encoded except RFC 3986's unreserved characters and
// '/'. Servers decode the header differently (versitygw reads '+' as a
// space), and a fully encoded value reads the same on all of them.
func copySource(bucket, key string) string {
	const hex = "0123456789ABCDEF"
	var sb strings.Builder
	sb.Grow(len(bucket) + 1 + 3*len(key))
	sb.WriteString(bucket)
	sb.WriteByte('/')
	for i := range len(key) {
		c := key[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '-', c == '_', c == '.', c == '~', c == '/':
			sb.WriteByte(c)
		default:
			sb.WriteByte('%')
			sb.WriteByte(hex[c>>4])
			sb.WriteByte(hex[c&15])
		}
	}
	return sb.String()
}

// copyAllowed refuses a copy condition unless the server is known to
// enforce it: forced on, or seen enforced by the copy probe.
func (b *s3Backend) copyAllowed(op, key, header string, has func(s3diag.CopyProbeResult) bool) error {
	switch b.mode {
	case ConditionalOn:
		return nil
	case ConditionalOff:
		return fmt.Errorf("s3: %s %q in bucket %q: conditions are not enabled on this backend (conditional=off): %w",
			op, key, b.bucket, backend.ErrUnsupported)
	}
	c, resolved := b.copyCaps.get()
	switch {
	case !resolved:
		return fmt.Errorf("s3: %s %q in bucket %q: the backend's capabilities were not resolved (conditional=auto probes the server's copy conditions at driver.ResolveCapabilities, which was not called or did not succeed): %w",
			op, key, b.bucket, backend.ErrUnsupported)
	case !has(c):
		return fmt.Errorf("s3: %s %q in bucket %q: the server does not enforce %s on CopyObject (%s): %w",
			op, key, b.bucket, header, c.Evidence, backend.ErrUnsupported)
	}
	return nil
}
