package runsc

import (
	"debug/buildinfo"
	_ "embed"
	"fmt"
	"strings"
)

//go:embed VERSION
var pinnedVersion string

// RunscModule is the Go module runsc is built from.
const RunscModule = "gvisor.dev/gvisor"

// PinnedVersion is the version of runsc toolhost is built and tested with: the module version in
// runsc/VERSION, which runsc/runsc.mk installs.
func PinnedVersion() string { return strings.TrimSpace(pinnedVersion) }

// BinaryVersion reads the gVisor module version a runsc binary was built from (runsc itself prints
// VERSION_MISSING when built with go install, so the Go build information is what tells).
func BinaryVersion(path string) (string, error) {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the build information of %s: %w", path, err)
	}
	if info.Main.Path == RunscModule || strings.HasPrefix(info.Path, RunscModule+"/") {
		if info.Main.Version != "" && info.Main.Version != "(devel)" {
			return info.Main.Version, nil
		}
	}
	for _, dep := range info.Deps {
		if dep.Path == RunscModule {
			return dep.Version, nil
		}
	}
	return "", fmt.Errorf("%s wasn't built from %s", path, RunscModule)
}
