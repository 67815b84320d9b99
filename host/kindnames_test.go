package host

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// builtInKinds are the kinds toolhost ships. The host knows a kind by what it says of itself in
// Describe (sdk.Info), never by one of these names.
var builtInKinds = map[string]bool{"python": true, "graph": true, "prompt": true, "http": true}

// kindNameAllowed are the places a built-in kind's name may be written in the host's code, as a
// word that is not the kind: file (relative to host/) and the string.
var kindNameAllowed = map[[2]string]string{
	{"egress/egress.go", "http"}:  "the URL scheme the egress proxy forwards",
	{"egress/keys.go", "http"}:    "the scheme of the proxy's URL",
	{"mcp/oauth.go", "http"}:      "the scheme of the host's own URL",
	{"cluster/client.go", "http"}: "the scheme of the other hosts' URLs",
}

// kindNames lists each string literal of root's non-test Go files (outside testdata and the
// packages of test support, *test) that is a built-in kind's name and not allowed, as
// "file:line: name".
func kindNames(t *testing.T, root string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (d.Name() == "testdata" || strings.HasSuffix(d.Name(), "test")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			v, err := strconv.Unquote(lit.Value)
			if err != nil || !builtInKinds[v] || kindNameAllowed[[2]string{filepath.ToSlash(rel), v}] != "" {
				return true
			}
			found = append(found, rel+":"+strconv.Itoa(fset.Position(lit.Pos()).Line)+": "+v)
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestTheHostNamesNoBuiltInKind: what the host does differently for a kind (its runs count
// against sandbox budgets, only admins write its tools, its run tables are open, it keeps
// conversation sandboxes, its runs bring outside text) comes from what the kind declares in
// Describe, so a third-party kind can declare the same; the host's code names no built-in kind.
func TestTheHostNamesNoBuiltInKind(t *testing.T) {
	if found := kindNames(t, "."); len(found) > 0 {
		t.Fatalf("the host names built-in kinds; read what the kind says of itself (sdk.Info) instead:\n%s",
			strings.Join(found, "\n"))
	}
	// The check finds a name where there is one, and lets tests and test support be.
	root := t.TempDir()
	write := func(rel, src string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("runs/budgets.go", "package runs\n\nconst sandboxKind = \"python\"\n")
	write("runs/budgets_test.go", "package runs\n\nconst k = \"python\"\n")
	write("sessions/sessionstest/kind.go", "package sessionstest\n\nconst k = \"python\"\n")
	write("egress/egress.go", "package egress\n\nconst scheme = \"http\"\n")
	if found := kindNames(t, root); len(found) != 1 || found[0] != filepath.Join("runs", "budgets.go")+":3: python" {
		t.Fatalf("the check found %v; want runs/budgets.go:3 alone", found)
	}
}
