package fs

import (
	"strings"
	"testing"

	"github.com/cairnhq/state/backend"
)

// FuzzDiskPath pins the layout's two promises for every valid key: the
// mapping is reversible, and no path element can be mistaken for the
// backend's own files or leave the root.
func FuzzDiskPath(f *testing.F) {
	for _, k := range []string{"a", "a/b", ".cairn-state/.lock", "x/.tmp/y", "ü/🙂 ?#%+&=", "..a/b..", ".lock"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if backend.ValidateKey(key) != nil {
			return
		}
		p := diskPath(key)
		if got := keyOf(p); got != key {
			t.Fatalf("keyOf(diskPath(%q)) = %q", key, got)
		}
		segs := strings.Split(p, "/")
		for i, seg := range segs {
			last := i == len(segs)-1
			switch {
			case seg == "" || seg == "." || seg == "..":
				t.Fatalf("diskPath(%q) = %q has segment %q", key, p, seg)
			case last && strings.Contains(seg, dirSuffix):
				t.Fatalf("diskPath(%q) = %q: object name contains a backslash", key, p)
			case !last && (!strings.HasSuffix(seg, dirSuffix) || strings.Count(seg, dirSuffix) != 1):
				t.Fatalf("diskPath(%q) = %q: directory %q is not marked exactly once", key, p, seg)
			}
		}
	})
}
