package config

import (
	"os/exec"
	"strings"
	"testing"
)

// TestConfigImportsNoKind: config knows the host's tables only; the kinds' settings are theirs.
func TestConfigImportsNoKind(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, p := range []string{"runsc", "plugins", "sdk", "host"} {
			if dep == "github.com/toolhost/toolhost/"+p || strings.HasPrefix(dep, "github.com/toolhost/toolhost/"+p+"/") {
				t.Errorf("config imports %s", dep)
			}
		}
	}
}
