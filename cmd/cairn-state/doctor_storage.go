package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strings"

	state "github.com/cairnhq/state"
	"github.com/cairnhq/state/backend/s3"
	"github.com/cairnhq/state/internal/driver"
	"github.com/cairnhq/state/internal/s3diag"
	"github.com/cairnhq/state/internal/setup"
)

// urlFacts are the url check's: the location and, on S3, the timeouts in
// force.
type urlFacts struct {
	Backend   string   `json:"backend,omitempty"` // "s3" or "file"
	Directory string   `json:"directory,omitempty"`
	Bucket    string   `json:"bucket,omitempty"`
	Root      string   `json:"root,omitempty"`
	Region    string   `json:"region,omitempty"`
	Endpoints []string `json:"endpoints,omitempty"`

	Conditional            string   `json:"conditional,omitempty"` // the URL's mode
	ConnectTimeoutSeconds  *float64 `json:"connect_timeout_seconds,omitempty"`
	ResponseTimeoutSeconds *float64 `json:"response_timeout_seconds,omitempty"`
	AttemptTimeoutSeconds  *float64 `json:"attempt_timeout_seconds,omitempty"`
	MaxAttempts            int      `json:"max_attempts,omitempty"`
	MaxBackoffSeconds      *float64 `json:"max_backoff_seconds,omitempty"`
}

// checkStorage checks the way to the storage: the URL, then the directory
// or, on S3, what the backend's diagnosis found (endpoints, credentials,
// region, bucket, conditional writes, clocks).
func (d *doctor) checkStorage(ctx context.Context) {
	if !d.checkURL(ctx) {
		return
	}
	switch b := d.b.(type) {
	case s3diag.Backend:
		d.checkS3(b.Diagnose(ctx))
	case driver.Directory:
		d.checkDirectory(ctx, b.Diagnose(ctx))
	}
}

// checkURL parses the URL and opens the backend as the other commands do
// (nothing is sent yet). It reports whether the storage checks can run.
func (d *doctor) checkURL(ctx context.Context) bool {
	raw := d.a.url
	scheme, rest, _ := strings.Cut(raw, ":")
	const fix = "fix --url (or CAIRN_STATE_URL): file:///abs/path, file:rel/path or s3://BUCKET[/ROOT]?endpoint=URL&region=R (cairn-state help)"
	isS3 := strings.EqualFold(scheme, "s3") && strings.HasPrefix(rest, "//")
	if isS3 {
		opts, root, err := s3.ParseURL("s3:" + rest)
		if err != nil {
			d.add(checkURL, statusFail, err.Error(), fix, nil)
			d.why = "the URL does not parse"
			return false
		}
		s3Budget(d.a.timeout)(&opts)
		t := &s3Store{opts: opts}
		t.endpoints, _ = s3.ParseEndpoints(opts.Endpoint)
		if len(t.endpoints) == 0 {
			t.endpoints = []string{"aws"}
		}
		d.s3, d.root = t, root
	}
	b, root, err := setup.OpenBackend(ctx, raw, setup.BackendOptions{Logger: d.a.logger, MustExist: true, S3: s3Budget(d.a.timeout)})
	switch {
	case errors.Is(err, state.ErrNoStore):
		dir := fileDir(raw)
		d.add(checkURL, statusOK, "a local directory, "+dir, "", &urlFacts{Backend: "file", Directory: dir})
		d.add(checkDirectory, statusFail, err.Error(), "check --url (or CAIRN_STATE_URL); the first write (cairn-state put, or the application's first boot) creates it, mode 0700", &dirFacts{Directory: dir})
		d.why = "there is no store"
		return false
	case errors.Is(err, state.ErrBadURL):
		d.add(checkURL, statusFail, err.Error(), fix, nil)
		d.why = "the URL does not parse"
		return false
	case err != nil:
		d.add(checkURL, statusFail, err.Error(), "", nil)
		d.why = "the backend could not be opened"
		return false
	}
	if c, ok := b.(io.Closer); ok {
		d.a.closers = append(d.a.closers, c)
	}
	d.b, d.root = b, root
	if !isS3 {
		dir := fileDir(raw)
		d.add(checkURL, statusOK, "a local directory, "+dir, "", &urlFacts{Backend: "file", Directory: dir})
		return true
	}
	d.add(checkURL, statusOK, d.s3.describe(root, d.a.timeout.String()), "", d.s3.facts(root))
	return true
}

// describe is the url line of an S3 store.
func (t *s3Store) describe(root, timeout string) string {
	o := t.opts
	where := fmt.Sprintf("S3 bucket %q", o.Bucket)
	if root != "" {
		where += fmt.Sprintf(", root %q", root)
	}
	region := o.Region
	if region == "" {
		region = "from the AWS configuration"
	} else {
		region = fmt.Sprintf("%q", region)
	}
	return fmt.Sprintf("%s on %s, region %s, conditional=%s; each attempt waits %s to connect and %s for an answer (--timeout %s)",
		where, strings.Join(t.endpoints, ", "), region, o.Conditional, o.ConnectTimeout, o.ResponseTimeout, timeout)
}

// facts are the url line's facts of an S3 store: the timeouts and
// attempts in force.
func (t *s3Store) facts(root string) *urlFacts {
	o := t.opts
	attempts := cmp.Or(o.MaxAttempts, s3diag.DefaultMaxAttempts)
	return &urlFacts{Backend: "s3", Bucket: o.Bucket, Root: root, Region: o.Region, Endpoints: t.endpoints,
		Conditional: string(o.Conditional), ConnectTimeoutSeconds: seconds(o.ConnectTimeout),
		ResponseTimeoutSeconds: seconds(o.ResponseTimeout), AttemptTimeoutSeconds: seconds(cmp.Or(o.AttemptTimeout, s3diag.DefaultAttemptTimeout)),
		MaxAttempts: max(attempts, len(t.endpoints)), MaxBackoffSeconds: seconds(o.MaxBackoff)}
}

// fileDir is the absolute directory of a file: URL, for messages.
func fileDir(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	p := u.Path
	if u.Opaque != "" {
		if p, err = url.PathUnescape(u.Opaque); err != nil {
			return raw
		}
	}
	if abs, err := filepath.Abs(filepath.FromSlash(p)); err == nil {
		return abs
	}
	return p
}
