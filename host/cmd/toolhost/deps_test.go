package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestTheHostImportsNoSandboxCode: the host binary talks to kinds over the plugin protocol only;
// the gVisor code (runsc and below) is the python kind's, in its own process.
func TestTheHostImportsNoSandboxCode(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "github.com/toolhost/toolhost/runsc" || strings.HasPrefix(dep, "github.com/toolhost/toolhost/runsc/") ||
			strings.HasPrefix(dep, "github.com/toolhost/toolhost/plugins/") {
			t.Errorf("the host binary imports %s", dep)
		}
	}
}
