// Package layering holds the repository's layering checks (issue 15's
// acceptance): replay methods are plugins, known to the runtime, the
// command line, the learners and the actors only through the sampler's
// registry and the capabilities a sampler.Method declares.
package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apexrl/apex/sampler"
)

// root is the repository's root, from this package's folder.
const root = "../.."

// scanned are the folders whose non-test Go files may not name a replay
// method nor recover a concrete stage: they use the registry
// (sampler.Lookup, sampler.Methods) and Method's capabilities.
var scanned = []string{"runtime", "cmd", "learner", "actor"}

// experimentWrapper reports the command line's wrappers of the papers'
// experiments (cmd/apex/experiment*.go): their subcommands are named after
// the papers ("apex experiment ter"), and, like the experiment packages,
// they are users of the registry that may name the arms they compare.
func experimentWrapper(path string) bool {
	return strings.HasPrefix(filepath.ToSlash(path), filepath.ToSlash(filepath.Join(root, "cmd", "apex"))+"/experiment")
}

// goFiles returns the non-test Go files under dirs.
func goFiles(t *testing.T, dirs []string) []string {
	t.Helper()
	var files []string
	for _, dir := range dirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(files) < 20 {
		t.Fatalf("only %d files under %v: wrong root?", len(files), dirs)
	}
	return files
}

// TestNoMethodNames: no string literal in the scanned packages is a
// registered method's name: the runtime and the command line loop over
// the registry, so adding a method touches none of them.
func TestNoMethodNames(t *testing.T) {
	names := sampler.Methods()
	if len(names) < 11 {
		t.Fatalf("sampler.Methods() = %v", names)
	}
	fset := token.NewFileSet()
	for _, path := range goFiles(t, scanned) {
		if experimentWrapper(path) {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if s, err := strconv.Unquote(lit.Value); err == nil && slices.Contains(names, s) {
				t.Errorf("%s: the method name %s as a string: use the registry (sampler.Lookup, a Spec's fields)", fset.Position(lit.Pos()), lit.Value)
			}
			return true
		})
	}
}

// TestNoConcreteStageAssertions: no type assertion or type switch outside
// sampler/ (non-test files) recovers a concrete sampler type (*sampler.X):
// what a method offers beyond Selector is declared on sampler.Method.
func TestNoConcreteStageAssertions(t *testing.T) {
	fset := token.NewFileSet()
	concrete := func(e ast.Expr) bool {
		star, ok := e.(*ast.StarExpr)
		if !ok {
			return false
		}
		sel, ok := star.X.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		pkg, ok := sel.X.(*ast.Ident)
		return ok && pkg.Name == "sampler"
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && e.Name() != "sampler" && !strings.HasPrefix(e.Name(), ".") {
			dirs = append(dirs, e.Name())
		}
	}
	for _, path := range goFiles(t, dirs) {
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.TypeAssertExpr:
				if n.Type != nil && concrete(n.Type) {
					t.Errorf("%s: a type assertion to a concrete sampler stage", fset.Position(n.Pos()))
				}
			case *ast.CaseClause:
				for _, e := range n.List {
					if concrete(e) {
						t.Errorf("%s: a type switch on a concrete sampler stage", fset.Position(e.Pos()))
					}
				}
			}
			return true
		})
	}
}

// TestActorDoesNotImportSampler: the actors depend on no replay method
// (go list -deps ./actor lists no sampler package).
func TestActorDoesNotImportSampler(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/apexrl/apex/actor").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/apexrl/apex/sampler") {
			t.Errorf("actor depends on %s", p)
		}
	}
}
