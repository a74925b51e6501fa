package setup

import "strings"

// SplitRecipients splits a list of recipients separated by commas or
// newlines, dropping blanks and lines starting with '#' (so that a
// recipients file as age -R reads it works too).
func SplitRecipients(s string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' }) {
		if f = strings.TrimSpace(f); f != "" && !strings.HasPrefix(f, "#") {
			out = append(out, f)
		}
	}
	return out
}
