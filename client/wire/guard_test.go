package wire_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/toolhost/toolhost"

// imports lists the import paths of the non-test Go files of one folder.
func imports(t *testing.T, dir string) map[string][]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string][]string{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, name), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			found[p] = append(found[p], filepath.Join(dir, name))
		}
	}
	return found
}

// clientImporters walks root (a copy of host/) and names each non-test
// file, outside cmd/toolhost and testdata, that imports package client.
func clientImporters(t *testing.T, root string) []string {
	t.Helper()
	var bad []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if rel == filepath.Join("cmd", "toolhost") || d.Name() == "testdata" {
			return filepath.SkipDir
		}
		bad = append(bad, imports(t, path)[module+"/client"]...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return bad
}

// TestNoHostPackageButTheCLIImportsClient: the host speaks the protocol
// through package wire; only the CLI, which is a client, imports client.
func TestNoHostPackageButTheCLIImportsClient(t *testing.T) {
	if bad := clientImporters(t, "../../host"); len(bad) > 0 {
		t.Fatalf("these host files import %s/client; import %s/client/wire for the protocol's types instead:\n%s",
			module, module, strings.Join(bad, "\n"))
	}
	// The check finds an importer where there is one, and lets the CLI be.
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
	uses := "package x\n\nimport _ \"" + module + "/client\"\n"
	write("cmd/toolhost/main.go", uses)
	write("runs/x_test.go", uses)
	write("runs/run.go", "package x\n\nimport _ \""+module+"/client/wire\"\n")
	write("api/api.go", uses)
	if bad := clientImporters(t, root); len(bad) != 1 || !strings.HasSuffix(bad[0], filepath.Join("api", "api.go")) {
		t.Fatalf("the check found %v; want api/api.go alone", bad)
	}
}

// TestWireImportsNothingOfOurs: wire is the leaf everyone may import, so
// it imports the standard library only.
func TestWireImportsNothingOfOurs(t *testing.T) {
	for p, files := range imports(t, ".") {
		if first, _, _ := strings.Cut(p, "/"); strings.Contains(first, ".") {
			t.Errorf("%s imports %s; package wire imports the standard library only", files[0], p)
		}
	}
}

// consts gives the string constants of a Go file whose names start with
// prefix, name → value.
func consts(t *testing.T, file, prefix string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			for i, n := range v.Names {
				if !strings.HasPrefix(n.Name, prefix) || i >= len(v.Values) {
					continue
				}
				if lit, ok := v.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					found[n.Name], _ = strconv.Unquote(lit.Value)
				}
			}
		}
	}
	return found
}

// docSections splits docs/protocol.md at its headings: heading → the
// lines under it, up to the next heading of any level.
func docSections(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string][]string{}
	var heading string
	var part string // the "## " heading a "### " one is under
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "#") {
			heading = line
			if strings.HasPrefix(line, "## ") {
				part = line
			}
			if strings.HasPrefix(line, "### ") {
				sections[part+" > "+line] = nil
			}
			continue
		}
		sections[heading] = append(sections[heading], line)
	}
	return sections
}

// firstColumn gives the `words` of the first column of a markdown table.
func firstColumn(lines []string) []string {
	var words []string
	for _, l := range lines {
		cells := strings.Split(l, "|")
		if !strings.HasPrefix(l, "|") || len(cells) < 3 {
			continue
		}
		for _, w := range strings.Split(cells[1], ",") {
			w = strings.TrimSpace(w)
			if len(w) > 2 && w[0] == '`' && w[len(w)-1] == '`' {
				words = append(words, w[1:len(w)-1])
			}
		}
	}
	return words
}

// same fails unless code and doc hold the same set, naming what each lacks.
func same(t *testing.T, what string, code map[string]string, doc []string) {
	t.Helper()
	inDoc := map[string]bool{}
	for _, w := range doc {
		inDoc[w] = true
	}
	inCode := map[string]bool{}
	for name, v := range code {
		inCode[v] = true
		if !inDoc[v] {
			t.Errorf("%s %q (wire.%s) is not in docs/protocol.md: add it, with what it means", what, v, name)
		}
	}
	for _, w := range slices.Sorted(func(yield func(string) bool) {
		for w := range inDoc {
			if !yield(w) {
				return
			}
		}
	}) {
		if !inCode[w] {
			t.Errorf("docs/protocol.md lists the %s %q, which package wire does not declare: declare it, or take it out of the doc", what, w)
		}
	}
	if len(code) < 5 || len(inDoc) < 5 {
		t.Fatalf("found %d %ss in wire and %d in the doc: the parsing is broken", len(code), what, len(inDoc))
	}
}

// TestTheCodesAreTheDocumentedOnes: the error codes of package wire are
// the rows of docs/protocol.md's table "Error codes", no more, no less.
func TestTheCodesAreTheDocumentedOnes(t *testing.T) {
	rows := docSections(t)["## Error codes"]
	same(t, "code", consts(t, "codes.go", "Code"), firstColumn(rows))
}

// TestTheMessageTypesAreTheDocumentedOnes: the frame and event types of
// package wire are the ones docs/protocol.md describes: a heading
// ### `type` under "Messages a client sends" or "Messages the host sends",
// or a row of the table of run events.
func TestTheMessageTypesAreTheDocumentedOnes(t *testing.T) {
	var doc []string
	sections := docSections(t)
	for h := range sections {
		part, sub, ok := strings.Cut(h, " > ### `")
		if !ok || part != "## Messages a client sends" && part != "## Messages the host sends" {
			continue
		}
		name, _, _ := strings.Cut(sub, "`")
		doc = append(doc, name)
	}
	doc = append(doc, firstColumn(sections["### Run events"])...)
	same(t, "message type", consts(t, "wire.go", "Type"), doc)
}

// TestEachCodeIsDeclaredOnce: no Go file outside package wire declares a
// constant holding one of wire's codes; it names wire's (errcode
// re-exports some for kinds as errcode.BadArgs = wire.CodeBadArgs, which
// is a name, not a declaration).
func TestEachCodeIsDeclaredOnce(t *testing.T) {
	codes := map[string]string{}
	for name, v := range consts(t, "codes.go", "Code") {
		codes[v] = name
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	here, _ := filepath.Abs(".")
	// known are the copies not yet replaced, each to be dropped from here
	// with its fix (the test fails when one is gone, to say so):
	// plugins/python is being reworked elsewhere (issue 21, items 1 and 4).
	known := map[string]bool{"plugins/python/run.go codeTimeout": true}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == here || d.Name() == "testdata" || d.Name() == "build" || strings.HasPrefix(d.Name(), ".") && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasSuffix(path, ".pb.go") {
			return nil
		}
		for name, v := range consts(t, path, "") {
			rel, _ := filepath.Rel(root, path)
			if known[filepath.ToSlash(rel)+" "+name] {
				delete(known, filepath.ToSlash(rel)+" "+name)
				continue
			}
			if code, ok := codes[v]; ok {
				t.Errorf("%s declares %s = %q, which is wire.%s: use wire.%s (or errcode's name for it)", rel, name, v, code, code)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for k := range known {
		t.Errorf("%s is no longer a copy of a code: take it out of known", k)
	}
}

// TestTheHostWritesNoCodeOrTypeAsALiteral: host/ and client/ name every code and
// message type by its constant, so that its spelling lives in wire alone:
// no Code: "…" or "code": "…" with one of wire's codes, and no Type: "…"
// with one of its message types, in their non-test files (a fake of
// another server's answers may use its own words).
func TestTheHostWritesNoCodeOrTypeAsALiteral(t *testing.T) {
	codes := map[string]string{}
	for name, v := range consts(t, "codes.go", "Code") {
		codes[v] = name
	}
	types := map[string]string{}
	for name, v := range consts(t, "wire.go", "Type") {
		types[v] = name
	}
	for _, top := range []string{"../../host", "../../client"} {
		err := filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" || d.Name() == "modeltest" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				kv, ok := n.(*ast.KeyValueExpr)
				if !ok {
					return true
				}
				key := ""
				switch k := kv.Key.(type) {
				case *ast.Ident:
					key = k.Name
				case *ast.BasicLit:
					key, _ = strconv.Unquote(k.Value)
				}
				lit, ok := kv.Value.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				v, _ := strconv.Unquote(lit.Value)
				switch {
				case (key == "Code" || key == "code") && codes[v] != "":
					t.Errorf("%s: the code %s is written as a literal; use wire.%s", fset.Position(lit.Pos()), lit.Value, codes[v])
				case key == "Type" && types[v] != "":
					t.Errorf("%s: the message type %s is written as a literal; use wire.%s", fset.Position(lit.Pos()), lit.Value, types[v])
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
