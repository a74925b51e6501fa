package state_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// surfaceBudget is the most exported names the public packages may have
// together (issue #22, docs/adr/0062).
const surfaceBudget = 200

// notPublic are the directories, relative to the module root, whose
// packages are not the library's public API: an application imports none
// of them (internal/ cannot be imported, cmd/ and examples/ are programs,
// lock/model holds the spin models).
var notPublic = []string{"internal", "cmd", "examples", "docs", "lock/model"}

// The public surface is counted as issue #22 counts it: in the non-test
// files of every public package, the top-level exported types, functions,
// constants and variables, and the exported methods of exported types
// (struct fields and interface methods are not counted). It stays within
// the budget, and every name counted has a doc comment.
func TestPublicSurface_WithinBudgetAndDocumented(t *testing.T) {
	counts := map[string][]string{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || slices.Contains(notPublic, filepath.ToSlash(path))) {
			return filepath.SkipDir
		}
		names, undocumented, err := exportedNames(path)
		if err != nil {
			return err
		}
		if len(names) > 0 {
			counts[filepath.ToSlash(path)] = names
		}
		for _, n := range undocumented {
			t.Errorf("%s: %s has no doc comment", path, n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	pkgs := make([]string, 0, len(counts))
	total := 0
	for p, names := range counts {
		pkgs = append(pkgs, p)
		total += len(names)
	}
	slices.SortFunc(pkgs, func(a, b string) int { return len(counts[b]) - len(counts[a]) })
	var b strings.Builder
	for _, p := range pkgs {
		fmt.Fprintf(&b, "\n%-20s %3d", p, len(counts[p]))
	}
	t.Logf("exported names: %d (budget %d)%s", total, surfaceBudget, b.String())
	if len(counts) < 10 {
		t.Errorf("found %d public packages (%q); the walk missed some", len(counts), pkgs)
	}
	if total > surfaceBudget {
		t.Errorf("the public packages export %d names, over the budget of %d: move what only cairn-state's own packages call to internal/ (docs/adr/0050)", total, surfaceBudget)
		for _, p := range pkgs {
			t.Logf("%s: %s", p, strings.Join(counts[p], ", "))
		}
	}
}

// exportedNames returns the names counted in the package in dir (none for
// a directory without one, or for a command), and those without a doc
// comment.
func exportedNames(dir string) (names, undocumented []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	fset := token.NewFileSet()
	pkgs := map[string][]*ast.File{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.ParseComments)
		if err != nil {
			return nil, nil, err
		}
		pkgs[f.Name.Name] = append(pkgs[f.Name.Name], f)
	}
	for name, files := range pkgs {
		if name == "main" {
			continue
		}
		types := map[string]bool{}
		for _, f := range files {
			for _, d := range f.Decls {
				if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE {
					for _, s := range g.Specs {
						if ts := s.(*ast.TypeSpec); ts.Name.IsExported() {
							types[ts.Name.Name] = true
						}
					}
				}
			}
		}
		add := func(name string, docs ...*ast.CommentGroup) {
			names = append(names, name)
			if !slices.ContainsFunc(docs, func(c *ast.CommentGroup) bool { return c != nil }) {
				undocumented = append(undocumented, name)
			}
		}
		for _, f := range files {
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							if s.Name.IsExported() {
								add("type "+s.Name.Name, d.Doc, s.Doc)
							}
						case *ast.ValueSpec:
							for _, n := range s.Names {
								if n.IsExported() {
									add(d.Tok.String()+" "+n.Name, d.Doc, s.Doc, s.Comment)
								}
							}
						}
					}
				case *ast.FuncDecl:
					if !d.Name.IsExported() {
						continue
					}
					if d.Recv == nil {
						add("func "+d.Name.Name, d.Doc)
						continue
					}
					if recv := receiverType(d.Recv.List[0].Type); types[recv] {
						add("method "+recv+"."+d.Name.Name, d.Doc)
					}
				}
			}
		}
	}
	slices.Sort(names)
	return names, undocumented, nil
}

// receiverType is the name of a method's receiver type: T for T, *T, T[P]
// and *T[P].
func receiverType(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	switch x := e.(type) {
	case *ast.IndexExpr:
		e = x.X
	case *ast.IndexListExpr:
		e = x.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}
