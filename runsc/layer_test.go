package runsc_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestTheGVisorLayerImportsNoToolhostConcept: runsc/ drives gVisor and knows nothing of
// toolhost's protocol, config or kinds: its non-test code imports, of this module, only runsc/
// itself and internal/ (a kind that needs toolhost's error codes or config, as the python kind's
// conversation sandboxes do, keeps that code with the kind: plugins/python/session).
func TestTheGVisorLayerImportsNoToolhostConcept(t *testing.T) {
	const module = "github.com/toolhost/toolhost/"
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			rest, ours := strings.CutPrefix(p, module)
			if ours && !strings.HasPrefix(rest, "runsc") && !strings.HasPrefix(rest, "internal/") {
				t.Errorf("runsc/%s imports %s: the gVisor layer imports only runsc/ and internal/ of this module", path, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
