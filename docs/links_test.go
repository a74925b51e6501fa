package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// pendingDocs are pages that other work in flight creates; a link to one
// of them is reported, not failed, until the page exists. Empty this list
// as they land.
var pendingDocs = map[string]string{}

var (
	inlineLinkRE = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refLinkRE    = regexp.MustCompile(`^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	codeSpanRE   = regexp.MustCompile("`[^`]*`")
	headingRE    = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	htmlAnchorRE = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
)

// markdownFiles are README.md and every .md file under docs/, as paths
// relative to the repository's root.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, filepath.Join("docs", p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// proseLines returns the file's lines outside fenced code blocks, with
// inline code spans blanked, each with its 1-based line number.
func proseLines(text string) map[int]string {
	out := map[int]string{}
	fenced := false
	for i, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out[i+1] = codeSpanRE.ReplaceAllString(l, "``")
		}
	}
	return out
}

// anchors are the fragment ids GitHub gives a file's headings.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range proseLines(text) {
		if m := htmlAnchorRE.FindStringSubmatch(l); m != nil {
			out[m[1]] = true
		}
	}
	fenced := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		m := headingRE.FindStringSubmatch(l)
		if fenced || m == nil {
			continue
		}
		slug := slugify(m[2])
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// slugify is GitHub's heading anchor: lower case, punctuation dropped
// (but hyphens and underscores), spaces as hyphens; link text and code
// marks count by their text.
func slugify(h string) string {
	h = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Every relative link in README.md and docs/ names a file of this
// repository that exists (and, with a #fragment, a heading in it); none
// leaves the repository.
func TestLinks_RelativeLinksResolveInsideTheRepository(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, file := range markdownFiles(t) {
		raw, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range proseLines(string(raw)) {
			var targets []string
			for _, m := range inlineLinkRE.FindAllStringSubmatch(line, -1) {
				targets = append(targets, m[1])
			}
			if m := refLinkRE.FindStringSubmatch(line); m != nil {
				targets = append(targets, m[1])
			}
			for _, target := range targets {
				if regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`).MatchString(target) {
					continue // http:, https:, mailto:
				}
				checked++
				path, frag, _ := strings.Cut(target, "#")
				resolved := filepath.Join(filepath.Dir(filepath.Join(root, file)), filepath.FromSlash(path))
				if path == "" {
					resolved = filepath.Join(root, file)
				}
				rel, err := filepath.Rel(root, resolved)
				if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
					t.Errorf("%s:%d: link %q leaves the repository", file, n, target)
					continue
				}
				rel = filepath.ToSlash(rel)
				body, err := os.ReadFile(resolved)
				if fi, statErr := os.Stat(resolved); statErr == nil && fi.IsDir() {
					err = nil
				}
				if err != nil {
					if why, ok := pendingDocs[rel]; ok {
						t.Logf("%s:%d: link to %s, which does not exist yet (%s)", file, n, rel, why)
						continue
					}
					t.Errorf("%s:%d: link %q: %s does not exist", file, n, target, rel)
					continue
				}
				if frag != "" && strings.HasSuffix(rel, ".md") && !anchors(string(body))[frag] {
					t.Errorf("%s:%d: link %q: %s has no heading with the anchor #%s", file, n, target, rel, frag)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("found no relative link at all: the link pattern is broken")
	}
}

// The user's docs do not send readers to files that are not in the
// repository: the product's design page and the engineers' shared folder
// are not shipped.
func TestLinks_NoMentionOfFilesOutsideTheRepository(t *testing.T) {
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range append([]string{"../README.md"}, files...) {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(raw), "\n") {
			for _, outside := range []string{"design.md", "shared/"} {
				if strings.Contains(line, outside) {
					t.Errorf("%s:%d: mentions %s, which is not in the repository: %s", file, i+1, outside, strings.TrimSpace(line))
				}
			}
		}
	}
}
