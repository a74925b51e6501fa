// Package secret recognises secrets in text — age identities of every
// kind, SSH and other PEM private keys, the passphrases age generates, and
// the credentials of URLs — so that cairn-state can refuse one where a
// name or a public value belongs, and hide every one wherever text is
// echoed: errors, logs, --json. It is the one detector the store, the
// root package and the CLI share (docs/adr/0036).
//
// [Detect] says what a value looks like; [Redact] hides what it finds in
// free text; a [Redactor] also hides, exactly, the credentials of values
// it was given (a store URL, the arguments of a command line), whatever
// characters they hold.
package secret

import (
	"regexp"
	"strings"
)

// Kind is a kind of secret, in words that fit "… looks like KIND".
type Kind string

// The kinds Detect reports.
const (
	// AgeKey is an age X25519 identity, AGE-SECRET-KEY-1….
	AgeKey Kind = "a secret key (AGE-SECRET-KEY-…)"
	// AgeHybridKey is an age post-quantum hybrid identity,
	// AGE-SECRET-KEY-PQ-1….
	AgeHybridKey Kind = "a secret key (AGE-SECRET-KEY-PQ-…)"
	// AgePluginKey is an age plugin identity, AGE-PLUGIN-NAME-1….
	AgePluginKey Kind = "a secret key (AGE-PLUGIN-…)"
	// PrivateKey is a PEM private key (SSH, PKCS#1, PKCS#8, …), or the
	// body of an OpenSSH one pasted without its armour.
	PrivateKey Kind = "a private key (-----BEGIN … PRIVATE KEY-----)"
	// Passphrase is a passphrase of the shape `age -p` generates: ten
	// lower-case words joined by '-'. Other passphrases cannot be told
	// from ordinary text.
	Passphrase Kind = "a passphrase (ten words joined by '-', as age -p generates)"
	// URLCredentials is a URL with a user or password in it,
	// SCHEME://USER:PASSWORD@HOST.
	URLCredentials Kind = "a URL with credentials (SCHEME://USER:PASSWORD@…)"
)

// Placeholder is what every secret is replaced by.
const Placeholder = "REDACTED"

var (
	// ageKeyRE finds age identities in any case, anywhere: X25519,
	// post-quantum hybrid, plugin.
	ageKeyRE = regexp.MustCompile(`(?i)age-(?:secret-key-(?:pq-)?|plugin-[a-z0-9._+-]+-)1[0-9a-z]+`)
	// pemRE finds a PEM private key block, to its END line or to the end
	// of the text when it was cut.
	pemRE = regexp.MustCompile(`(?is)-----BEGIN[ A-Z0-9]*PRIVATE KEY-----.*?(?:-----END[ A-Z0-9]*PRIVATE KEY-----|\z)`)
	// opensshBodyRE finds the base64 body of an OpenSSH private key
	// ("openssh-key-v1" encoded), with the lines that follow it, also in
	// quoted text where a newline reads \n.
	opensshBodyRE = regexp.MustCompile(`b3BlbnNzaC1rZXktdjE[A-Za-z0-9+/=]*(?:(?:\s|\\[nr])+[A-Za-z0-9+/=]{16,})*`)
	// wordsRE finds runs of lower-case words joined by '-'; passphrase
	// keeps those that are one.
	wordsRE = regexp.MustCompile(`[a-z]+(?:-[a-z]+)+`)
	// schemeRE finds where a URL's authority starts: SCHEME:// or, in a
	// percent-encoded URL, SCHEME%3A%2F%2F.
	schemeRE = regexp.MustCompile(`(?i)[a-z][a-z0-9+.\-]*(?:://|%3A%2F%2F)`)
)

// Passphrases as age generates them: ten words of the BIP-39 English list
// (three to eight letters each).
const (
	passphraseWords   = 10
	passphraseWordMin = 3
	passphraseWordMax = 8
)

// Detect reports what secret s holds, anywhere in it and in any case, or
// "" when it holds none that can be recognised. It is broader than
// Redact: the armour of a private key without its body counts, since
// where a value is refused a false alarm costs little.
func Detect(s string) Kind {
	if m := ageKeyRE.FindString(s); m != "" {
		return ageKind(m)
	}
	switch {
	case pemRE.MatchString(s), opensshBodyRE.MatchString(s), namesPrivateKey(s):
		return PrivateKey
	case len(passphrases(s)) > 0:
		return Passphrase
	case len(urlUserinfo(s)) > 0:
		return URLCredentials
	}
	return ""
}

// namesPrivateKey reports text that a private key was cut from: PEM
// armour ("-----BEGIN", "PRIVATE KEY-----"), in any case.
func namesPrivateKey(s string) bool {
	u := strings.ToUpper(s)
	return strings.Contains(u, "PRIVATE KEY-----") || strings.Contains(u, "-----BEGIN") && strings.Contains(u, "PRIVATE KEY")
}

func ageKind(m string) Kind {
	u := strings.ToUpper(m)
	switch {
	case strings.HasPrefix(u, "AGE-SECRET-KEY-PQ-"):
		return AgeHybridKey
	case strings.HasPrefix(u, "AGE-PLUGIN-"):
		return AgePluginKey
	}
	return AgeKey
}

// Redact returns s with every secret it recognises replaced by
// Placeholder: age identities, PEM private keys and OpenSSH key bodies,
// age-generated passphrases, and the userinfo of every URL in it (for a
// URL in free text, up to whitespace or an unescaped '"': the credentials
// of a known URL are hidden exactly by a Redactor).
func Redact(s string) string { return (*Redactor)(nil).Redact(s) }

// span is a range [start, end) of a string.
type span struct{ start, end int }

// generic returns the spans of s that hold a recognisable secret.
func generic(s string) []span {
	var out []span
	for _, re := range []*regexp.Regexp{ageKeyRE, pemRE, opensshBodyRE} {
		for _, m := range re.FindAllStringIndex(s, -1) {
			out = append(out, span{m[0], m[1]})
		}
	}
	out = append(out, passphrases(s)...)
	return append(out, urlUserinfo(s)...)
}

// passphrases returns the spans of s that are age-generated passphrases:
// exactly ten words of three to eight lower-case letters joined by '-',
// not part of a longer word or run.
func passphrases(s string) []span {
	var out []span
	for _, m := range wordsRE.FindAllStringIndex(s, -1) {
		before := strings.TrimRight(s[:m[0]], "-") // a flag's dashes: --WORDS
		if before != "" && isWordByte(before[len(before)-1]) || m[1] < len(s) && isWordByte(s[m[1]]) {
			continue
		}
		words := strings.Split(s[m[0]:m[1]], "-")
		if len(words) != passphraseWords {
			continue
		}
		ok := true
		for _, w := range words {
			ok = ok && len(w) >= passphraseWordMin && len(w) <= passphraseWordMax
		}
		if ok {
			out = append(out, span{m[0], m[1]})
		}
	}
	return out
}

func isWordByte(c byte) bool {
	return c == '-' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// urlUserinfo returns the spans of the userinfo of every URL in free text
// s: from SCHEME:// to the last '@' of the authority, which ends at '/',
// '?', '#', whitespace or an unescaped '"' (a URL quoted with %q has its
// own quotes escaped). In a percent-encoded URL (SCHEME%3A%2F%2F…) the
// authority also ends at '&' and its '@' is %40.
func urlUserinfo(s string) []span {
	var out []span
	for _, m := range schemeRE.FindAllStringIndex(s, -1) {
		encoded := !strings.HasSuffix(s[m[0]:m[1]], "://")
		start, end := m[1], m[1]
		for end < len(s) {
			c := s[end]
			if c == '/' || c == '?' || c == '#' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' ||
				c == '"' && (end == start || s[end-1] != '\\') || encoded && (c == '&' || hasFoldPrefix(s[end:], "%2F") || hasFoldPrefix(s[end:], "%3F") || hasFoldPrefix(s[end:], "%23")) {
				break
			}
			end++
		}
		auth := s[start:end]
		at := strings.LastIndex(auth, "@")
		if encoded {
			at = lastFoldIndex(auth, "%40")
		}
		if at > 0 {
			out = append(out, span{start, start + at})
		}
	}
	return out
}

func hasFoldPrefix(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

func lastFoldIndex(s, sub string) int {
	for i := len(s) - len(sub); i >= 0; i-- {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return i
		}
	}
	return -1
}

// replace returns s with every span replaced by Placeholder, overlapping
// and adjacent spans merged into one.
func replace(s string, spans []span) string {
	if len(spans) == 0 {
		return s
	}
	sortSpans(spans)
	var b strings.Builder
	pos := 0
	for i := 0; i < len(spans); {
		cur := spans[i]
		for i++; i < len(spans) && spans[i].start <= cur.end; i++ {
			cur.end = max(cur.end, spans[i].end)
		}
		b.WriteString(s[pos:cur.start])
		b.WriteString(Placeholder)
		pos = cur.end
	}
	b.WriteString(s[pos:])
	return b.String()
}

func sortSpans(spans []span) {
	// Few spans: an insertion sort by start.
	for i := 1; i < len(spans); i++ {
		for j := i; j > 0 && spans[j].start < spans[j-1].start; j-- {
			spans[j], spans[j-1] = spans[j-1], spans[j]
		}
	}
}
