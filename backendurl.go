package state

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/fs"
	"github.com/cairnhq/state/backend/s3"
	"github.com/cairnhq/state/store"
)

// ErrBadURL means a backend URL could not be understood.
var ErrBadURL = errors.New("bad backend URL")

const urlForms = "want file:///abs/path, file:rel/path or s3://BUCKET[/ROOT/PREFIX]?endpoint=URL&region=R"

// OpenBackend opens the backend a URL names and returns it with the root
// prefix the store must use:
//
//   - file:///abs/path or file:rel/path (relative to the working directory):
//     a local directory, created (0700) if missing; the root is empty;
//   - s3://BUCKET[/ROOT/PREFIX]?endpoint=URL&region=R&path_style=true&conditional=auto|on|off:
//     an S3 bucket, with credentials from the standard AWS chain; the root
//     is ROOT/PREFIX. With conditional=auto (the default) the server's
//     conditional-write support is probed under the root's reserved prefix.
//
// Errors wrap ErrBadURL when the URL itself is wrong. logger (nil means
// slog.Default()) receives the backend's own reports, such as the probe's
// outcome.
func OpenBackend(ctx context.Context, rawURL string, logger *slog.Logger) (backend.Backend, string, error) {
	if logger == nil {
		logger = slog.Default()
	}
	switch {
	case strings.TrimSpace(rawURL) == "":
		return nil, "", fmt.Errorf("%w: empty (set %s or pass a URL); %s", ErrBadURL, EnvURL, urlForms)
	case strings.HasPrefix(rawURL, "s3://"):
		opts, root, err := s3.ParseURL(rawURL)
		if err != nil {
			return nil, "", fmt.Errorf("%w: %w", ErrBadURL, err)
		}
		opts.Logger = logger
		if root != "" {
			opts.ProbePrefix = root + "/" + store.Prefix
		}
		b, err := s3.New(ctx, opts)
		if err != nil {
			return nil, "", err
		}
		// s3.New no longer probes; until the lock resolves capabilities
		// itself before it acquires (backend.ResolveCapabilities), resolve
		// them here, as New used to. Remove this once it does, so that
		// read-only commands write nothing.
		if _, err := b.ResolveCapabilities(ctx); err != nil {
			b.Close()
			return nil, "", err
		}
		return b, root, nil
	case strings.HasPrefix(rawURL, "file:"):
		dir, err := filePath(rawURL)
		if err != nil {
			return nil, "", err
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, "", fmt.Errorf("state directory: %w", err)
		}
		// A write takes milliseconds; an hour-old temp file is a killed
		// writer's leftover, swept so that crashes don't pile up on disk.
		b, err := fs.New(dir, fs.Options{Logger: logger, RemoveTempFilesOlderThan: time.Hour})
		if err != nil {
			return nil, "", err
		}
		return b, "", nil
	default:
		return nil, "", fmt.Errorf("%w: %q: unknown scheme; %s", ErrBadURL, redact(rawURL), urlForms)
	}
}

// filePath returns the directory of a file: URL.
func filePath(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrBadURL, err)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("%w: %q: a file URL takes no query, fragment or user", ErrBadURL, raw)
	}
	var p string
	switch {
	case u.Opaque != "": // file:rel/path
		if p, err = url.PathUnescape(u.Opaque); err != nil {
			return "", fmt.Errorf("%w: %q: %w", ErrBadURL, raw, err)
		}
	case u.Host != "" && u.Host != "localhost":
		return "", fmt.Errorf("%w: %q: host %q: only local directories are supported (file:///abs/path)", ErrBadURL, raw, u.Host)
	default: // file:///abs/path
		p = u.Path
	}
	if p == "" {
		return "", fmt.Errorf("%w: %q: no path; %s", ErrBadURL, raw, urlForms)
	}
	return filepath.Clean(filepath.FromSlash(p)), nil
}

// redact hides a password, should a URL carry one, before it is printed.
func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return "(unparsable URL)"
}
