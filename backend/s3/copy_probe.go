package s3

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/uuid"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/s3diag"
)

// ProbeCopy checks, on throwaway objects below the probe prefix (hidden
// from List, removed afterwards), which conditions of CopyObject the
// server enforces, each in both directions as Probe does for
// PutObject: a false condition must fail with 412 and change nothing, a
// true one must succeed. Under ConditionalAuto s3Backend.ResolveCapabilities
// runs it once and s3Backend.Copy then uses only the conditions it saw
// enforced; calling it reports the server's behaviour without changing
// the backend's. Transport, permission and bucket errors fail the probe.
func (b *s3Backend) ProbeCopy(ctx context.Context) (s3diag.CopyProbeResult, error) {
	src := b.probePrefix + probeKeyPart + uuid.NewString()
	dst := src + "-copy"
	fail := func(step string, err error) (s3diag.CopyProbeResult, error) {
		return s3diag.CopyProbeResult{}, fmt.Errorf("s3: copy-condition probe (%s): %w", step, err)
	}
	// state tracks what each probe key may hold, so that the clean-up
	// warns only about an object that was really written (as Probe's).
	state := map[string]int{src: probeAbsent, dst: probeAbsent}
	track := func(key string, err error) {
		var na *noAnswerError
		switch {
		case err == nil:
			state[key] = probeWritten
		case errors.As(err, &na) && state[key] == probeAbsent:
			state[key] = probeMaybe
		}
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		for _, key := range []string{src, dst} {
			if state[key] == probeAbsent {
				continue
			}
			err := b.call(cctx, "remove a probe object", key, false, func(ctx context.Context, ep func(*s3.Options)) error {
				_, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &b.bucket, Key: &key}, ep)
				return err
			})
			switch {
			case err == nil:
			case state[key] == probeWritten:
				b.log.WarnContext(ctx, "s3 backend: could not remove a copy-probe object; it is hidden from listings and can be deleted by hand",
					"bucket", b.bucket, "key", key, "error", err)
			default:
				b.log.DebugContext(ctx, "s3 backend: a copy-probe request got no answer, and removing the object it may have left failed too",
					"bucket", b.bucket, "key", key, "error", err)
			}
		}
	}()
	put := func(data string) (etag string, err error) {
		var out *s3.PutObjectOutput
		defer func() { track(src, err) }()
		err = b.call(ctx, "probe", src, false, func(ctx context.Context, ep func(*s3.Options)) (err error) {
			out, err = b.client.PutObject(ctx, &s3.PutObjectInput{
				Bucket: &b.bucket, Key: &src,
				Body: strings.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
			}, ep)
			return err
		})
		if err != nil {
			return "", err
		}
		return aws.ToString(out.ETag), nil
	}
	copyObject := func(edit func(*s3.CopyObjectInput)) error {
		in := &s3.CopyObjectInput{Bucket: &b.bucket, Key: &dst, CopySource: aws.String(copySource(b.bucket, src))}
		edit(in)
		err := b.call(ctx, "probe", dst, false, func(ctx context.Context, ep func(*s3.Options)) error {
			_, err := b.client.CopyObject(ctx, in, ep)
			return err
		})
		track(dst, err)
		return err
	}
	// dstETag is the destination's ETag, "" when it does not exist.
	dstETag := func() (string, error) {
		var out *s3.HeadObjectOutput
		err := b.call(ctx, "probe", dst, false, func(ctx context.Context, ep func(*s3.Options)) (err error) {
			out, err = b.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b.bucket, Key: &dst}, ep)
			return err
		})
		code, status := errorCode(err)
		switch {
		case err == nil:
			state[dst] = probeWritten
			return aws.ToString(out.ETag), nil
		case code == "NoSuchKey" || code == "NotFound" || status == 404:
			return "", nil
		}
		return "", err
	}
	// falseCondition fails the probe on an answer to a copy whose
	// condition was false that is neither 412 nor a refusal of the
	// header (which it describes); judge then sorts the answer, once the
	// destination was looked at: wrote tells whether it changed.
	falseCondition := func(cerr error) (string, error) {
		why, refusedHeader := conditionRefused(cerr)
		if cerr != nil && !refusedHeader && !isPreconditionFailed(cerr) {
			return "", cerr
		}
		return why, nil
	}
	judge := func(step string, cerr error, why string, wrote bool) (bool, string) {
		switch {
		case cerr == nil:
			return false, step + " was carried out (header ignored)"
		case why != "":
			return false, step + " was refused: " + why
		case wrote:
			return false, step + " failed with 412 but wrote the destination anyway"
		}
		return true, ""
	}
	// trueCondition sorts the answer to a copy whose condition held.
	trueCondition := func(step string, cerr error) (bool, string, error) {
		if cerr == nil {
			return true, "", nil
		}
		if isPreconditionFailed(cerr) {
			return false, step + " failed with 412", nil
		}
		if why, refusedHeader := conditionRefused(cerr); refusedHeader {
			return false, step + " was refused: " + why, nil
		}
		return false, "", cerr
	}
	var evidence []string
	res := s3diag.CopyProbeResult{SourceConditions: true, DestinationConditions: true}

	etag1, err := put("copy probe 1")
	if err != nil {
		return fail("create the source", err)
	}

	// x-amz-copy-source-if-match with another ETag must fail and write
	// nothing; with the source's own it must succeed.
	step := "CopyObject with a non-matching x-amz-copy-source-if-match"
	cerr := copyObject(func(in *s3.CopyObjectInput) { in.CopySourceIfMatch = aws.String(wrongETag) })
	why, err := falseCondition(cerr)
	if err != nil {
		return fail(step, err)
	}
	got, err := dstETag()
	if err != nil {
		return fail("look at the destination", err)
	}
	if ok, why := judge(step, cerr, why, got != ""); !ok {
		res.SourceConditions, evidence = false, append(evidence, why)
	}
	step = "CopyObject with the source's own ETag in x-amz-copy-source-if-match"
	ok, why, err := trueCondition(step, copyObject(func(in *s3.CopyObjectInput) { in.CopySourceIfMatch = aws.String(etag1) }))
	if err != nil {
		return fail(step, err)
	}
	if !ok {
		res.SourceConditions, evidence = false, append(evidence, why)
		// The next step needs the destination to exist.
		if err := copyObject(func(*s3.CopyObjectInput) {}); err != nil {
			return fail("copy without conditions", err)
		}
	}

	// The destination exists now: If-None-Match: * must fail and leave it
	// as it is (the source changed meanwhile, so a copy carried out
	// shows), and succeed once the destination is gone.
	before, err := dstETag()
	if err != nil {
		return fail("look at the destination", err)
	}
	if _, err := put("copy probe 2"); err != nil {
		return fail("rewrite the source", err)
	}
	step = "CopyObject with If-None-Match: * onto an existing object"
	cerr = copyObject(func(in *s3.CopyObjectInput) { in.IfNoneMatch = aws.String("*") })
	why, err = falseCondition(cerr)
	if err != nil {
		return fail(step, err)
	}
	after, err := dstETag()
	if err != nil {
		return fail("look at the destination", err)
	}
	if ok, why := judge(step, cerr, why, after != before); !ok {
		res.DestinationConditions, evidence = false, append(evidence, why)
	}
	if res.DestinationConditions {
		err := b.call(ctx, "probe", dst, false, func(ctx context.Context, ep func(*s3.Options)) error {
			_, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &b.bucket, Key: &dst}, ep)
			return err
		})
		if err != nil {
			return fail("remove the destination", err)
		}
		state[dst] = probeAbsent
		step = "CopyObject with If-None-Match: * onto a missing object"
		ok, why, err := trueCondition(step, copyObject(func(in *s3.CopyObjectInput) { in.IfNoneMatch = aws.String("*") }))
		if err != nil {
			return fail(step, err)
		}
		if !ok {
			res.DestinationConditions, evidence = false, append(evidence, why)
		}
	}

	switch {
	case res.SourceConditions && res.DestinationConditions:
		res.Evidence = "x-amz-copy-source-if-match and If-None-Match enforced on CopyObject"
	case res.SourceConditions:
		res.Evidence = "x-amz-copy-source-if-match enforced on CopyObject; " + strings.Join(evidence, "; ")
	case res.DestinationConditions:
		res.Evidence = "If-None-Match enforced on CopyObject; " + strings.Join(evidence, "; ")
	default:
		res.Evidence = strings.Join(evidence, "; ")
	}
	return res, nil
}

// ResolveCapabilities implements driver.Resolver. Under ConditionalAuto
// it runs Probe the first time it is called and keeps the
// finding for the backend's life; concurrent callers wait for that one
// probe (or for their context). A probe that fails is not kept: the next
// call probes again. The finding is logged at Info with the lock mode it
// implies and why. Once that has succeeded it runs ProbeCopy,
// the same way, for the conditions of s3Backend.Copy. Under ConditionalOn
// and ConditionalOff it sends nothing.
func (b *s3Backend) ResolveCapabilities(ctx context.Context) (backend.Capabilities, error) {
	caps, err := b.resolveConditional(ctx)
	if err != nil {
		return backend.Capabilities{}, err
	}
	if err := b.resolveCopy(ctx); err != nil {
		return backend.Capabilities{}, err
	}
	return caps, nil
}

// copyCapabilities is what the backend knows of the server's copy
// conditions (ConditionalAuto); inflight is non-nil while a probe runs.
type copyCapabilities struct {
	mu       sync.Mutex
	resolved bool
	found    s3diag.CopyProbeResult
	inflight chan struct{}
}

func (c *copyCapabilities) get() (s3diag.CopyProbeResult, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.found, c.resolved
}

// adopt takes the source-condition finding a store recorded, unless a
// probe of this backend found one already: the destination condition,
// which no server tested enforces and the store does not use, is taken
// as absent.
func (c *copyCapabilities) adopt(source bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.resolved {
		return
	}
	c.resolved = true
	c.found = s3diag.CopyProbeResult{SourceConditions: source,
		Evidence: fmt.Sprintf("recorded in the store's manifest (x-amz-copy-source-if-match enforced: %t)", source)}
}

// copySourceConditions reports whether Copy may send
// x-amz-copy-source-if-match.
func (b *s3Backend) copySourceConditions() bool {
	switch b.mode {
	case ConditionalOn:
		return true
	case ConditionalOff:
		return false
	}
	c, resolved := b.copyCaps.get()
	return resolved && c.SourceConditions
}

// resolveCopy runs the copy probe under ConditionalAuto the first time it
// is called and keeps its finding for the backend's life; concurrent
// callers wait for that one probe (or for their context). A probe that
// fails is not kept. Under ConditionalOn and ConditionalOff it sends
// nothing.
func (b *s3Backend) resolveCopy(ctx context.Context) error {
	if b.mode != ConditionalAuto {
		return nil
	}
	c := &b.copyCaps
	for {
		c.mu.Lock()
		if c.resolved {
			c.mu.Unlock()
			return nil
		}
		if ch := c.inflight; ch != nil {
			c.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		ch := make(chan struct{})
		c.inflight = ch
		c.mu.Unlock()

		res, err := b.ProbeCopy(ctx)
		c.mu.Lock()
		c.inflight = nil
		if err == nil {
			c.resolved, c.found = true, res
		}
		close(ch)
		c.mu.Unlock()
		if err != nil {
			return err
		}
		b.log.InfoContext(ctx, "s3 backend: copy-condition probe: "+res.Evidence,
			slog.String("bucket", b.bucket), slog.String("endpoint", b.CurrentEndpoint()),
			slog.Bool("copy_source_conditions", res.SourceConditions),
			slog.Bool("copy_destination_conditions", res.DestinationConditions))
		return nil
	}
}
