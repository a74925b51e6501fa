package store

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/secret"
	"github.com/cairnhq/state/internal/storemeta"
)

// MaxNameLen is the longest state name, in bytes. With the reserved prefix
// and a root of up to MaxRootLen bytes, every key stays within
// backend.MaxKeyLen.
const MaxNameLen = 512

// maxRootLen is the longest root prefix, in bytes.
const maxRootLen = backend.MaxKeyLen - MaxNameLen - len(Prefix) - 1

// checkAppName reports whether name is a valid state name for applications:
// non-empty UTF-8 of at most MaxNameLen bytes, made of '/'-separated
// segments, none of them empty, "." or "..", not starting with '/', with no
// control character and no backslash, not looking like a secret (an age
// identity, a private key, a passphrase, a URL with credentials: names are
// stored in the clear, so a secret pasted where a name belongs is refused,
// and not repeated in the error), and not starting with '.' (those names
// are reserved for cairn-state's own objects, such as the lock). The error
// is a *storemeta.NameError.
func checkAppName(name string) error {
	return validateName(name, false)
}

func validateName(name string, internal bool) error {
	bad := func(why string) error { return &storemeta.NameError{Name: name, Reason: why} }
	switch {
	case name == "":
		return bad("empty")
	case len(name) > MaxNameLen:
		return bad(fmt.Sprintf("%d bytes, longer than %d", len(name), MaxNameLen))
	case !utf8.ValidString(name):
		return bad("not valid UTF-8")
	case name[0] == '/':
		return bad("absolute (starts with '/'); names are relative to the store")
	}
	for _, r := range name {
		switch {
		case unicode.IsControl(r):
			return bad("contains a control character")
		case r == '\\':
			return bad("contains a backslash")
		}
	}
	if kind := secret.Detect(name); kind != "" {
		return &storemeta.NameError{Reason: fmt.Sprintf("refused: it looks like %s; names are stored and listed in the clear, so a secret is never one (the name is not shown)", kind)}
	}
	for seg := range strings.SplitSeq(name, "/") {
		switch seg {
		case "":
			return bad("has an empty path segment (trailing or doubled '/')")
		case ".", "..":
			return bad("has a '" + seg + "' path segment; names cannot leave the store")
		}
	}
	if name[0] == '.' && !internal {
		return &storemeta.NameError{Name: name, Reason: "names starting with '.' are reserved for cairn-state's own objects", Reserved: true}
	}
	return nil
}

// validatePrefix checks a List prefix: empty, or a string that would be a
// valid name if a final segment were appended.
func validatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if err := validateName(prefix+"x", true); err != nil {
		ne := err.(*storemeta.NameError)
		return &storemeta.NameError{Name: prefix, Reason: "as a list prefix: " + ne.Reason}
	}
	return nil
}

// normalizeRoot trims one trailing '/' from root and checks it.
func normalizeRoot(root string) (string, error) {
	root = strings.TrimSuffix(root, "/")
	if root == "" {
		return "", nil
	}
	bad := func(why string) error { return fmt.Errorf("%w %q: %s", ErrInvalidRoot, root, why) }
	if root[0] == '/' {
		return "", bad("absolute (starts with '/')")
	}
	if len(root) > maxRootLen {
		return "", bad(fmt.Sprintf("%d bytes, longer than %d", len(root), maxRootLen))
	}
	if err := backend.ValidateKey(root); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidRoot, err)
	}
	for seg := range strings.SplitSeq(root, "/") {
		if strings.EqualFold(seg, strings.TrimSuffix(Prefix, "/")) {
			return "", bad("contains the reserved segment " + Prefix)
		}
	}
	return root, nil
}

// reservedPrefix is the key prefix under which a store with this
// (normalized) root keeps its objects.
func reservedPrefix(root string) string {
	if root == "" {
		return Prefix
	}
	return root + "/" + Prefix
}
