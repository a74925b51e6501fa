package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/uuid"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/s3diag"
)

// probeKeyPart marks the probe's throwaway objects below the probe prefix.
const probeKeyPart = ".probe-"

// wrongETag is a well-formed ETag that no object of the probe can have (the
// MD5 of the probe's payloads is never all zeros).
const wrongETag = `"00000000000000000000000000000000"`

func (b *s3Backend) isProbeKey(key string) bool {
	return strings.HasPrefix(key, b.probePrefix+probeKeyPart)
}

// isServerTempName reports whether key is the name versitygw's posix
// backend links an overwrite's data at, for the moment before it renames
// it over the object: ".<name>.sgwtmp.<nanoseconds>" beside <name>. A
// listing made in that moment shows it; it is nobody's object (a store
// took one under .cairn-state/ for a foreign object and refused as
// "manifest missing").
func isServerTempName(key string) bool {
	base := key[strings.LastIndexByte(key, '/')+1:]
	i := strings.LastIndex(base, ".sgwtmp.")
	if len(base) < 2 || base[0] != '.' || i < 2 {
		return false
	}
	digits := base[i+len(".sgwtmp."):]
	if digits == "" {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
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
// work anyway. s3Backend.ResolveCapabilities runs it once under
// ConditionalAuto; calling Probe itself reports the server's behaviour now
// without changing the backend's Capabilities. Each step is an ordinary
// request, with the backend's retries and failover: on a cluster the
// probe runs against whichever endpoint is in use, and its finding holds
// for the bucket (every node runs the same server). The probe object is
// removed afterwards and hidden from List meanwhile; if it was written and
// cannot be removed, a warning says so.
func (b *s3Backend) Probe(ctx context.Context) (s3diag.ProbeResult, error) {
	key := b.probePrefix + probeKeyPart + uuid.NewString()
	fail := func(step string, err error) (s3diag.ProbeResult, error) {
		return s3diag.ProbeResult{}, fmt.Errorf("s3: conditional-write probe (%s): %w", step, err)
	}
	// object tracks whether the probe object exists, so that the clean-up
	// warns only about an object that was really written.
	object := probeAbsent
	defer func() {
		if object == probeAbsent {
			return
		}
		// Remove the probe object even if ctx was cancelled mid-probe.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		err := b.call(cctx, "remove the probe object", key, false, func(ctx context.Context, ep func(*s3.Options)) error {
			_, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &b.bucket, Key: &key}, ep)
			return err
		})
		switch {
		case err == nil:
		case object == probeWritten:
			b.log.WarnContext(ctx, "s3 backend: could not remove the probe object; it is hidden from listings and can be deleted by hand",
				"bucket", b.bucket, "key", key, "error", err)
		default:
			b.log.DebugContext(ctx, "s3 backend: the probe's first write got no answer, and removing the object it may have left failed too",
				"bucket", b.bucket, "key", key, "error", err)
		}
	}()
	put := func(data string, ifNoneMatch, ifMatch *string) (out *s3.PutObjectOutput, err error) {
		err = b.call(ctx, "probe", key, false, func(ctx context.Context, ep func(*s3.Options)) (err error) {
			out, err = b.client.PutObject(ctx, &s3.PutObjectInput{
				Bucket: &b.bucket, Key: &key,
				Body: strings.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
				IfNoneMatch: ifNoneMatch, IfMatch: ifMatch,
			}, ep)
			return err
		})
		return out, err
	}
	del := func(ifMatch *string) error {
		return b.call(ctx, "probe", key, false, func(ctx context.Context, ep func(*s3.Options)) error {
			_, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &b.bucket, Key: &key, IfMatch: ifMatch}, ep)
			return err
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
		var na *noAnswerError
		if errors.As(err, &na) {
			object = probeMaybe // the write may have landed unanswered
		}
		return fail("create the probe object", err)
	}
	object = probeWritten
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
	var got *s3.GetObjectOutput
	err = b.call(ctx, "probe", key, false, func(ctx context.Context, ep func(*s3.Options)) (err error) {
		got, err = b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &b.bucket, Key: &key}, ep)
		return err
	})
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
	err = del(aws.String(wrongETag))
	switch o, why, err := classify("DeleteObject with a non-matching If-Match", err); {
	case err != nil:
		return fail("conditional delete with a wrong ETag", err)
	case o != enforced:
		delOK, evidence = false, append(evidence, why)
		if o == ignored {
			object = probeMaybe // deleted, unless the server did something else
		}
	}

	// DeleteObject with If-Match: the current ETag must succeed (when the
	// object is still there to delete).
	if delOK {
		err := del(etag)
		switch {
		case err == nil:
			object = probeAbsent
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

	res := s3diag.ProbeResult{Supported: putOK && delOK, PutConditions: putOK, DeleteConditions: delOK}
	if res.Supported {
		res.Evidence = "If-None-Match and If-Match enforced on PutObject, If-Match on DeleteObject"
	} else {
		res.Evidence = strings.Join(evidence, "; ")
	}
	return res, nil
}

// What the probe knows of its object, for the clean-up.
const (
	probeAbsent  = iota // never written, or removed by the last step
	probeWritten        // written and still there
	probeMaybe          // a write got no answer, or a delete's effect is unknown
)

// resolveConditional is ResolveCapabilities' conditional-write part.
// Under ConditionalAuto it runs Probe the first time it is called and keeps the
// finding for the backend's life; concurrent callers wait for that one
// probe (or for their context). A probe that fails is not kept: the next
// call probes again. The finding is logged at Info with the lock mode it
// implies and why. Under ConditionalOn and ConditionalOff it sends
// nothing.
func (b *s3Backend) resolveConditional(ctx context.Context) (backend.Capabilities, error) {
	for {
		if b.caps.state() != capsUnresolved {
			return b.Capabilities(), nil
		}
		b.caps.mu.Lock()
		if b.caps.state() != capsUnresolved {
			b.caps.mu.Unlock()
			continue
		}
		if ch := b.caps.inflight; ch != nil {
			b.caps.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return backend.Capabilities{}, ctx.Err()
			}
		}
		ch := make(chan struct{})
		b.caps.inflight = ch
		b.caps.mu.Unlock()

		res, err := b.Probe(ctx)
		b.caps.mu.Lock()
		adopted := b.caps.state() != capsUnresolved // meanwhile, by AdoptCapabilities
		if err == nil && !adopted {
			b.caps.set(res.Supported, "conditional-write probe: "+res.Evidence)
		}
		b.caps.mu.Unlock()
		if err == nil && !adopted {
			mode, why := res.LockMode()
			b.log.InfoContext(ctx, "s3 backend: conditional-write probe: lock mode "+mode+": "+why,
				slog.String("bucket", b.bucket), slog.String("endpoint", b.CurrentEndpoint()),
				slog.String("lock_mode", mode),
				slog.Bool("conditional_writes", res.Supported),
				slog.Bool("put_conditions", res.PutConditions),
				slog.Bool("delete_conditions", res.DeleteConditions),
				slog.String("evidence", res.Evidence))
		}
		b.caps.mu.Lock()
		b.caps.inflight = nil
		close(ch)
		b.caps.mu.Unlock()
		if err != nil {
			return backend.Capabilities{}, err
		}
		return b.Capabilities(), nil
	}
}

// AdoptCapabilities implements driver.Adopter: the backend uses caps, as
// the store recorded them when it was created, without probing — the
// copy conditions (CopySourceConditions) included, so that a later
// ResolveCapabilities sends nothing. Under ConditionalAuto it takes them
// unless a probe of this backend already found otherwise (a copy finding
// of its own is kept over the record); under ConditionalOn and ConditionalOff, which force a
// lock mode, caps must agree with the URL. A disagreement fails with an
// error wrapping backend.ErrCapabilityMismatch that says which parameter
// to change, and changes nothing.
func (b *s3Backend) AdoptCapabilities(caps backend.Capabilities) error {
	mode := func(conditional bool) string {
		if conditional {
			return "compare-and-swap"
		}
		return "claims"
	}
	switch b.mode {
	case ConditionalOn, ConditionalOff:
		if forced := b.mode == ConditionalOn; forced != caps.ConditionalWrites {
			return fmt.Errorf("%w: conditional=%s in the URL forces lock mode %s, but the store's lock mode is %s: "+
				"remove conditional=%s from the URL (every instance of a store must take its lock the same way)",
				backend.ErrCapabilityMismatch, b.mode, mode(forced), mode(caps.ConditionalWrites), b.mode)
		}
		return nil
	}
	b.caps.mu.Lock()
	defer b.caps.mu.Unlock()
	switch st := b.caps.state(); {
	case st == capsUnresolved:
		b.caps.set(caps.ConditionalWrites, "recorded in the store's manifest: "+caps.Evidence)
	case (st == capsConditional) != caps.ConditionalWrites:
		return fmt.Errorf("%w: this process's probe of the server found lock mode %s (%s), but the store's lock mode is %s",
			backend.ErrCapabilityMismatch, mode(st == capsConditional), b.caps.why(), mode(caps.ConditionalWrites))
	}
	b.copyCaps.adopt(caps.CopySourceConditions)
	return nil
}

// The states of a backend's conditional-write capability.
const (
	capsUnresolved int32 = iota
	capsNone
	capsConditional
)

// capabilities is what the backend knows of the server's conditional
// writes and why; inflight is non-nil while a probe runs.
type capabilities struct {
	v        atomic.Int32
	evidence atomic.Pointer[string]
	mu       sync.Mutex
	inflight chan struct{}
}

func (c *capabilities) state() int32 { return c.v.Load() }

func (c *capabilities) conditional() bool { return c.v.Load() == capsConditional }

// why is what the capability was decided from ("" while unresolved).
func (c *capabilities) why() string {
	if p := c.evidence.Load(); p != nil {
		return *p
	}
	return ""
}

func (c *capabilities) set(conditional bool, why string) {
	c.evidence.Store(&why)
	if conditional {
		c.v.Store(capsConditional)
	} else {
		c.v.Store(capsNone)
	}
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
