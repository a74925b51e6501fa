package setup

import (
	"context"
	"log/slog"

	"github.com/cairnhq/state/internal/secret"
)

// RedactURL returns rawURL safe to print or log: every credential it
// carries is replaced by "REDACTED" (see [RedactURLIn] for what counts as
// one), and the rest is kept, so that the result still says which store is
// meant. It works on strings that do not parse as URLs too.
func RedactURL(rawURL string) string { return RedactURLIn(rawURL, rawURL) }

// RedactURLIn returns s with every credential that rawURL carries
// replaced by "REDACTED", and every other secret cairn-state recognises
// (age identities, private keys, age-generated passphrases): for messages
// of lower layers that may quote the URL, or a part of it. The
// credentials of a URL are
//
//   - the userinfo of the URL and of every URL inside its query
//     (s3://…?endpoint=http://USER:PASS@host), whatever characters it
//     holds (quotes, whitespace, '@'), and its user and password alone;
//   - the part before '@' of any query value that has one;
//   - the value of every query parameter whose name looks secret (it
//     contains secret, passw, pwd, token, key, credential, signature, auth
//     or session, in any case);
//
// each as given, percent-decoded or -encoded, and as %q quotes it. A user
// name or password shorter than four characters is hidden where it stands
// in the URL, not wherever it appears in s: a one-letter user name hidden
// everywhere would blank every such letter.
func RedactURLIn(s, rawURL string) string { return secret.NewRedactor(rawURL).Redact(s) }

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

// redactLogger returns a logger that hides rawURL's credentials, and any
// other secret, in every message and attribute it logs.
func redactLogger(l *slog.Logger, rawURL string) *slog.Logger {
	return slog.New(&redactHandler{h: l.Handler(), r: secret.NewRedactor(rawURL)})
}

// redactHandler is a slog.Handler that hides a URL's credentials.
type redactHandler struct {
	h slog.Handler
	r *secret.Redactor
}

func (r *redactHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return r.h.Enabled(ctx, level)
}

func (r *redactHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, r.r.Redact(rec.Message), rec.PC)
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
	return &redactHandler{h: r.h.WithAttrs(clean), r: r.r}
}

func (r *redactHandler) WithGroup(name string) slog.Handler {
	return &redactHandler{h: r.h.WithGroup(name), r: r.r}
}

// attr hides the URL's credentials in one attribute: a string, an error
// or any other value (then logged as its redacted text), in groups too.
func (r *redactHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString, slog.KindAny:
		a.Value = slog.StringValue(r.r.Redact(v.String()))
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
