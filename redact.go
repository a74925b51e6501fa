package state

import (
	"cmp"
	"context"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// redacted replaces each credential found in a URL.
const redacted = "REDACTED"

// RedactURL returns rawURL safe to print or log: every credential it
// carries is replaced by "REDACTED" (see [RedactURLIn] for what counts as
// one), and the rest is kept, so that the result still says which store is
// meant. It works on strings that do not parse as URLs too.
func RedactURL(rawURL string) string { return RedactURLIn(rawURL, rawURL) }

// RedactURLIn returns s with every credential that rawURL carries replaced
// by "REDACTED": for messages of lower layers that may quote the URL, or a
// part of it, as given. The credentials of a URL are
//
//   - the userinfo (user and password) of the URL and of every URL inside
//     its query (s3://…?endpoint=http://USER:PASS@host), as given and
//     percent-decoded;
//   - the part before '@' of any query value that has one;
//   - the value of every query parameter whose name looks secret (it
//     contains secret, passw, pwd, token, key, credential, signature, auth
//     or session, in any case).
func RedactURLIn(s, rawURL string) string { return hide(s, urlSecrets(rawURL)) }

// hide replaces each of secrets in s.
func hide(s string, secrets []string) string {
	for _, secret := range secrets {
		s = strings.ReplaceAll(s, secret, redacted)
	}
	return s
}

var (
	// userinfoRE finds SCHEME://USERINFO@ anywhere in a string.
	userinfoRE = regexp.MustCompile(`(?i)[a-z][a-z0-9+.\-]*://([^/?#@\s"']+)@`)
	// secretParamRE matches query parameter names whose values are secret.
	secretParamRE = regexp.MustCompile(`(?i)secret|passw|pwd|token|key|credential|signature|auth|session`)
)

// urlSecrets returns the credentials of rawURL (see RedactURLIn), longest
// first so that a secret containing another is replaced whole.
func urlSecrets(rawURL string) []string {
	var out []string
	add := func(s string) {
		if s == "" {
			return
		}
		out = append(out, s)
		if d, err := url.PathUnescape(s); err == nil && d != s {
			out = append(out, d)
		}
		if d, err := url.QueryUnescape(s); err == nil && d != s {
			out = append(out, d)
		}
	}
	addUserinfo := func(ui string) {
		add(ui)
		if user, pass, ok := strings.Cut(ui, ":"); ok {
			add(user)
			add(pass)
		}
	}
	forms := []string{rawURL}
	if d, err := url.QueryUnescape(rawURL); err == nil && d != rawURL {
		forms = append(forms, d)
	}
	for _, form := range forms {
		for _, m := range userinfoRE.FindAllStringSubmatch(form, -1) {
			addUserinfo(m[1])
		}
		_, query, ok := strings.Cut(form, "?")
		if !ok {
			continue
		}
		query, _, _ = strings.Cut(query, "#")
		for _, param := range strings.FieldsFunc(query, func(r rune) bool { return r == '&' || r == ';' }) {
			name, value, _ := strings.Cut(param, "=")
			if secretParamRE.MatchString(name) {
				add(value)
			}
			if at := strings.LastIndex(value, "@"); at >= 0 {
				ui := value[:at]
				if _, rest, ok := strings.Cut(ui, "://"); ok {
					ui = rest
				}
				addUserinfo(ui)
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	return slices.Compact(out)
}

// redactError is an error whose message has a URL's credentials hidden; it
// unwraps to the original, so that errors.Is and errors.As still work.
type redactError struct {
	msg string
	err error
}

func (e *redactError) Error() string { return e.msg }
func (e *redactError) Unwrap() error { return e.err }

// redactErr hides rawURL's credentials in err's message.
func redactErr(err error, rawURL string) error {
	if err == nil {
		return nil
	}
	if msg := RedactURLIn(err.Error(), rawURL); msg != err.Error() {
		return &redactError{msg: msg, err: err}
	}
	return err
}

// redactLogger returns a logger that hides rawURL's credentials in every
// message and attribute it logs, or l itself when the URL has none.
func redactLogger(l *slog.Logger, rawURL string) *slog.Logger {
	secrets := urlSecrets(rawURL)
	if len(secrets) == 0 {
		return l
	}
	return slog.New(&redactHandler{h: l.Handler(), secrets: secrets})
}

// redactHandler is a slog.Handler that hides a URL's credentials.
type redactHandler struct {
	h       slog.Handler
	secrets []string
}

func (r *redactHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return r.h.Enabled(ctx, level)
}

func (r *redactHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, hide(rec.Message, r.secrets), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(r.attr(a))
		return true
	})
	return r.h.Handle(ctx, out)
}

func (r *redactHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = r.attr(a)
	}
	return &redactHandler{h: r.h.WithAttrs(clean), secrets: r.secrets}
}

func (r *redactHandler) WithGroup(name string) slog.Handler {
	return &redactHandler{h: r.h.WithGroup(name), secrets: r.secrets}
}

// attr hides the URL's credentials in one attribute: a string, an error
// or any other value (then logged as its redacted text), in groups too.
func (r *redactHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString, slog.KindAny:
		a.Value = slog.StringValue(hide(v.String(), r.secrets))
	case slog.KindGroup:
		group := v.Group()
		clean := make([]slog.Attr, len(group))
		for i, g := range group {
			clean[i] = r.attr(g)
		}
		a.Value = slog.GroupValue(clean...)
	}
	return a
}
