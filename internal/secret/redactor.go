package secret

import (
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// A Redactor hides what [Redact] recognises and, exactly, the secrets of
// the values it was made with: the credentials of each URL among them
// (whatever characters they hold: quotes, whitespace, '@', ':'), and each
// whole value that [Detect] finds a secret in. The nil *Redactor hides
// what Redact does.
type Redactor struct {
	pieces []piece
}

// piece is one string to hide and where it may be hidden.
type piece struct {
	s    string
	role role
}

// role says where a piece shorter than minAnywhere is hidden: a short
// credential hidden everywhere would blank unrelated text (a one-letter
// user name, every such letter).
type role int

const (
	anywhere   role = iota // hidden wherever it appears, whatever its length
	userinfo               // the userinfo of a URL: short, only between SCHEME:// (or '=') and '@'
	paramValue             // the value of a secret query parameter: short, only after '='
	part                   // a user name or password alone: hidden only when long enough
)

// minAnywhere is the length from which a credential is hidden wherever it
// appears, not only where it stands in its URL.
const minAnywhere = 4

// secretParamRE matches query parameter names whose values are secret.
var secretParamRE = regexp.MustCompile(`(?i)secret|passw|pwd|token|key|credential|signature|auth|session`)

// NewRedactor returns a Redactor for values: URLs (a store's, an
// endpoint's) and any other text given by a user, such as the arguments
// of a command line. The credentials of a URL are
//
//   - its userinfo — SCHEME://USERINFO@ up to the last '@' before the
//     authority ends at '/', '?' or '#' — and that of every URL in its
//     query, with the user and the password each on its own;
//   - the part before '@' of a query value that has one (an endpoint
//     without a scheme);
//   - the value of every query parameter whose name looks secret (it
//     contains secret, passw, pwd, token, key, credential, signature,
//     auth or session, in any case);
//
// each as given, percent-decoded and -encoded, and as %q quotes it.
func NewRedactor(values ...string) *Redactor {
	r := &Redactor{}
	seen := map[piece]bool{}
	add := func(s string, ro role) {
		for _, v := range variants(s) {
			p := piece{v, ro}
			if v == "" || ro == part && len(v) < minAnywhere || seen[p] {
				continue
			}
			seen[p] = true
			r.pieces = append(r.pieces, p)
		}
	}
	for _, v := range values {
		candidates := []string{v}
		if flag, value, ok := strings.Cut(v, "="); ok && strings.HasPrefix(flag, "-") {
			candidates = append(candidates, value) // --flag=VALUE: its value is quoted alone
		}
		for _, c := range candidates {
			if k := Detect(c); k != "" && k != URLCredentials {
				add(c, anywhere)
				add(strings.TrimSpace(c), anywhere)
			}
			credentials(c, add)
		}
	}
	return r
}

// variants are the forms in which s may be printed.
func variants(s string) []string {
	out := []string{s, url.QueryEscape(s), url.PathEscape(s), quoted(s)}
	for _, unescape := range []func(string) (string, error){url.PathUnescape, url.QueryUnescape} {
		if d, err := unescape(s); err == nil && d != s {
			out = append(out, d, quoted(d))
		}
	}
	return out
}

// quoted is s as it appears inside %q's quotes.
func quoted(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// credentials hands the credentials of rawURL to add (see NewRedactor).
func credentials(rawURL string, add func(string, role)) {
	addUserinfo := func(ui string) {
		add(ui, userinfo)
		user, pass, hasPass := strings.Cut(ui, ":")
		add(user, part)
		if hasPass {
			add(pass, part)
			add(url.UserPassword(user, pass).String(), userinfo)
		} else {
			add(url.User(user).String(), userinfo)
		}
	}
	forms := []string{rawURL}
	for _, unescape := range []func(string) (string, error){url.PathUnescape, url.QueryUnescape} {
		if d, err := unescape(rawURL); err == nil && d != rawURL {
			forms = append(forms, d)
		}
	}
	for _, form := range forms {
		query := strings.IndexByte(form, '?')
		for i := 0; ; {
			k := strings.Index(form[i:], "://")
			if k < 0 {
				break
			}
			start := i + k + len("://")
			stops := "/?#"
			if query >= 0 && start > query {
				stops = "/?#&;" // a URL inside the query ends with its parameter
			}
			end := strings.IndexAny(form[start:], stops)
			if end < 0 {
				end = len(form) - start
			}
			if at := strings.LastIndex(form[start:start+end], "@"); at > 0 {
				addUserinfo(form[start : start+at])
			}
			i = start
		}
		if query < 0 {
			continue
		}
		q, _, _ := strings.Cut(form[query+1:], "#")
		for _, param := range strings.FieldsFunc(q, func(r rune) bool { return r == '&' || r == ';' }) {
			name, value, _ := strings.Cut(param, "=")
			if secretParamRE.MatchString(name) {
				add(value, paramValue)
			}
			if at := strings.LastIndex(value, "@"); at > 0 && !strings.Contains(value, "://") {
				addUserinfo(value[:at])
			}
		}
	}
}

// Redact returns s with every secret replaced by Placeholder: those
// Redact (the function) recognises and the pieces of r.
func (r *Redactor) Redact(s string) string {
	spans := generic(s)
	if r != nil {
		for _, p := range r.pieces {
			for i := 0; i <= len(s)-len(p.s); {
				k := strings.Index(s[i:], p.s)
				if k < 0 {
					break
				}
				start, end := i+k, i+k+len(p.s)
				if p.fits(s, start, end) {
					spans = append(spans, span{start, end})
				}
				i = start + 1
			}
		}
	}
	return replace(s, spans)
}

// fits reports whether p may be hidden at s[start:end].
func (p piece) fits(s string, start, end int) bool {
	if p.role == anywhere || len(p.s) >= minAnywhere {
		return true
	}
	before, after := s[:start], s[end:]
	afterEquals := strings.HasSuffix(before, "=")
	switch p.role {
	case userinfo:
		return (start == 0 || strings.HasSuffix(before, "://") || hasFoldSuffix(before, "%2F%2F") || afterEquals) &&
			(strings.HasPrefix(after, "@") || hasFoldPrefix(after, "%40"))
	case paramValue:
		return afterEquals
	}
	return false
}

func hasFoldSuffix(s, suffix string) bool {
	return len(s) >= len(suffix) && strings.EqualFold(s[len(s)-len(suffix):], suffix)
}
