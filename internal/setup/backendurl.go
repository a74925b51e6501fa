// Package setup turns what an operator or an application gives as text —
// a backend URL, identity files, a list of recipients — into the parts
// state.Open and the CLI build on, and redacts URLs for messages. It is
// internal: applications give the same text to state.Config.
package setup

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
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

// The environment variables that state.ConfigFromEnv and the CLI read.
const (
	// EnvURL holds the backend URL (file:///abs/path, file:rel/path, a
	// path, or s3://BUCKET[/ROOT]?endpoint=…).
	EnvURL = "CAIRN_STATE_URL"
	// EnvIdentity holds the path of an age identity file (as written by
	// age-keygen or `cairn-state keygen`) or of an SSH private key. Several
	// paths may be given, separated by the OS path list separator (':' on
	// Unix), for example an old and a new key during a rotation.
	EnvIdentity = "CAIRN_STATE_IDENTITY"
	// EnvRecipients holds extra recipients, such as a recovery key,
	// separated by commas or newlines (SSH recipients contain spaces): see
	// Config.Recipients.
	EnvRecipients = "CAIRN_STATE_RECIPIENTS"
	// EnvStoreID holds the store id to pin (Config.StoreID).
	EnvStoreID = "CAIRN_STATE_STORE_ID"
)

// ErrBadURL means a backend URL could not be understood.
var ErrBadURL = errors.New("bad backend URL")

// ErrNoStore means a store that must exist does not: a file: URL names a
// directory that is missing (see [BackendOptions].MustExist).
var ErrNoStore = errors.New("no state store")

const urlForms = "want file:///abs/path, file:rel/path, a path (rel/path, /abs/path) or s3://BUCKET[/ROOT/PREFIX]?endpoint=URL&region=R"

// BackendOptions configure [OpenBackend]. The zero value gives the
// defaults.
type BackendOptions struct {
	// Logger receives the backend's own reports, such as the
	// conditional-write probe's outcome; nil means slog.Default(). The
	// credentials the URL carries are hidden from what it receives.
	Logger *slog.Logger
	// MustExist makes OpenBackend fail with an error matching ErrNoStore,
	// creating nothing, when a file: URL names a directory that does not
	// exist: for tools that only look at a store, where a missing
	// directory is a typo, not a first boot. By default the directory is
	// created (0700), as an application's first boot needs. S3 buckets
	// are never created, so s3: URLs are not affected.
	MustExist bool
	// S3, when not nil, is called with the options an s3:// URL was
	// parsed into, before the backend is made, to set what the URL leaves
	// unset: a zero timeout or MaxAttempts is one the URL does not give.
	// cairn-state's --timeout derives the S3 timeouts from its budget
	// here. It is not called for file: URLs.
	S3 func(*s3.Options)
}

// OpenBackend opens the backend a URL names and returns it with the root
// prefix the store must use:
//
//   - file:///abs/path or file:rel/path (relative to the working directory),
//     or the path alone (rel/path, ./rel/path, /abs/path: no scheme): a
//     local directory, created (0700) if missing unless opts.MustExist;
//     the root is empty. A path starting with ~ is refused: only a shell
//     expands it, and not inside a URL, so it would name a directory
//     called "~";
//   - s3://BUCKET[/ROOT/PREFIX]?endpoint=URL&region=R&path_style=true&conditional=auto|on|off:
//     an S3 bucket, with credentials from the standard AWS chain; the root
//     is ROOT/PREFIX. With conditional=auto (the default) the server's
//     conditional-write support is probed under the root's reserved prefix.
//
// Schemes are case-insensitive (FILE:, S3://). Errors wrap ErrBadURL when
// the URL itself is wrong, and ErrNoStore for a missing directory under
// opts.MustExist. Errors and log records name the URL with its credentials
// hidden ([RedactURL]).
func OpenBackend(ctx context.Context, rawURL string, opts BackendOptions) (backend.Backend, string, error) {
	b, root, err := openBackend(ctx, rawURL, opts)
	return b, root, redactErr(err, rawURL)
}

func openBackend(ctx context.Context, rawURL string, opts BackendOptions) (backend.Backend, string, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger = redactLogger(logger, rawURL)
	scheme, rest, _ := strings.Cut(rawURL, ":")
	switch {
	case strings.TrimSpace(rawURL) == "":
		return nil, "", fmt.Errorf("%w: empty (set %s or pass a URL); %s", ErrBadURL, EnvURL, urlForms)
	case strings.EqualFold(scheme, "s3") && strings.HasPrefix(rest, "//"):
		// RFC 3986 schemes are case-insensitive; the s3 parser is given
		// the canonical one.
		s3opts, root, err := s3.ParseURL("s3:" + rest)
		if err != nil {
			return nil, "", fmt.Errorf("%w: %w", ErrBadURL, err)
		}
		if opts.S3 != nil {
			opts.S3(&s3opts)
		}
		s3opts.Logger = logger
		if root != "" {
			s3opts.ProbePrefix = root + "/" + store.Prefix
		}
		b, err := s3.New(ctx, s3opts)
		if err != nil {
			return nil, "", err
		}
		// s3.New sends no request: the conditional-write probe runs when
		// the lock resolves the capabilities before it acquires, so a
		// read-only command writes nothing (ADR 0017).
		return b, root, nil
	case strings.EqualFold(scheme, "file"), isBarePath(rawURL):
		dir, err := filePath(rawURL)
		if err != nil {
			return nil, "", err
		}
		if opts.MustExist {
			if err := mustExist(dir); err != nil {
				return nil, "", err
			}
		} else if err := os.MkdirAll(dir, 0o700); err != nil {
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
		return nil, "", fmt.Errorf("%w %q: unknown scheme; %s", ErrBadURL, RedactURL(rawURL), urlForms)
	}
}

// mustExist fails with ErrNoStore unless dir is an existing directory.
func mustExist(dir string) error {
	shown := dir
	if abs, err := filepath.Abs(dir); err == nil {
		shown = abs
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		return fmt.Errorf("%w at %s: the directory does not exist", ErrNoStore, shown)
	case err != nil:
		return fmt.Errorf("state directory: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("%w at %s: not a directory", ErrNoStore, shown)
	}
	return nil
}

// isBarePath reports a location given as a path, without a scheme: no
// ':' comes before its first '/'.
func isBarePath(raw string) bool {
	i := strings.IndexAny(raw, ":/")
	return i < 0 || raw[i] == '/'
}

// filePath returns the directory of a file: URL or of a bare path.
func filePath(raw string) (string, error) {
	var p string
	if isBarePath(raw) {
		p = raw
	} else {
		u, err := url.Parse(raw)
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrBadURL, err)
		}
		shown := RedactURL(raw)
		if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return "", fmt.Errorf("%w %q: a file URL takes no query, fragment or user", ErrBadURL, shown)
		}
		switch {
		case u.Opaque != "": // file:rel/path
			if p, err = url.PathUnescape(u.Opaque); err != nil {
				return "", fmt.Errorf("%w %q: %w", ErrBadURL, shown, err)
			}
		case u.Host != "" && u.Host != "localhost":
			return "", fmt.Errorf("%w %q: host %q: only local directories are supported (file:///abs/path)", ErrBadURL, shown, u.Host)
		default: // file:///abs/path
			p = u.Path
		}
	}
	switch {
	case p == "":
		return "", fmt.Errorf("%w %q: no path; %s", ErrBadURL, RedactURL(raw), urlForms)
	case strings.HasPrefix(p, "~"):
		return "", fmt.Errorf("%w %q: a path starting with ~ is not expanded (only a shell expands ~, and not inside a URL), so it would name a directory called %q here; give the full path, such as file://$HOME%s in a shell",
			ErrBadURL, RedactURL(raw), strings.SplitN(p, "/", 2)[0], strings.TrimPrefix(p, "~"))
	}
	return filepath.Clean(filepath.FromSlash(p)), nil
}
