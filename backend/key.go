package backend

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxKeyLen is the longest key, in bytes, that any backend accepts. It is
// S3's limit.
const MaxKeyLen = 1024

// ValidateKey reports whether key is acceptable to every backend. A valid key
// is non-empty UTF-8 of at most MaxKeyLen bytes, made of '/'-separated
// segments, none of them empty, "." or "..", with no NUL, no other control
// character and no backslash. The returned error wraps ErrInvalidKey and
// names the key (quoted, so that hostile bytes print safely).
func ValidateKey(key string) error {
	bad := func(why string) error {
		shown := key
		if len(shown) > 64 {
			shown = shown[:64] + "…"
		}
		return fmt.Errorf("%w %q: %s", ErrInvalidKey, shown, why)
	}
	switch {
	case key == "":
		return bad("empty")
	case len(key) > MaxKeyLen:
		return bad(fmt.Sprintf("%d bytes, longer than %d", len(key), MaxKeyLen))
	case !utf8.ValidString(key):
		return bad("not valid UTF-8")
	}
	for _, r := range key {
		switch {
		case r == 0:
			return bad("contains NUL")
		case r < 0x20 || r == 0x7f:
			return bad("contains a control character")
		case r == '\\':
			return bad("contains a backslash")
		}
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "":
			return bad("has an empty path segment (leading, trailing or doubled '/')")
		case ".", "..":
			return bad("has a '" + seg + "' path segment")
		}
	}
	return nil
}

// ValidatePrefix reports whether prefix may be passed to List: empty, or a
// string that would be a valid key if a final segment were appended.
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if err := ValidateKey(prefix + "x"); err != nil {
		return fmt.Errorf("list prefix: %w", err)
	}
	return nil
}
