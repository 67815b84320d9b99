// Package rootfs builds the root filesystem the python kind's sandboxes run on: a minimal Debian
// with python3, pip and the Debian packages a toolhost config's [python] packages names. The build
// itself is build.sh (debootstrap from this machine's Debian mirror, trimmed of what a sandbox never
// reads), embedded here so that an installed toolhost carries it; `make rootfs` and `toolhost rootfs`
// both run it through this package.
package rootfs

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"

	"github.com/pelletier/go-toml/v2"
)

//go:embed build.sh
var buildScript []byte

// DefaultDir is where the rootfs is when [python] rootfs does not say.
const DefaultDir = "/var/lib/toolhost/rootfs"

// basePackages are in every rootfs, whatever the config says: pip, so that a conversation's
// sandbox can pip install from the package hosts its egress proxy allows. python3 itself and a
// shell (bash, coreutils) come with the minimal Debian the build starts from.
var basePackages = []string{"python3-pip"}

// Plan is what a build makes: the folder and the Debian packages besides python3.
type Plan struct {
	Dir      string
	Packages []string
}

// PlanFor reads [python] rootfs and packages of a toolhost config (relative paths are relative to
// the config's folder, as toolhost reads them). A missing config means the defaults; other tables
// and keys are not this package's business and are ignored.
func PlanFor(configPath string) (Plan, error) {
	plan := Plan{Dir: DefaultDir, Packages: slices.Clone(basePackages)}
	data, err := os.ReadFile(configPath)
	if errors.Is(err, fs.ErrNotExist) {
		return plan, nil
	}
	if err != nil {
		return Plan{}, fmt.Errorf("reading the config for the rootfs: %w", err)
	}
	var cfg struct {
		Python struct {
			Rootfs   string   `toml:"rootfs"`
			Packages []string `toml:"packages"`
		} `toml:"python"`
	}
	if err := toml.Unmarshal(data, &cfg); err != nil {
		return Plan{}, fmt.Errorf("reading [python] rootfs and packages from %s: %w", configPath, err)
	}
	if d := cfg.Python.Rootfs; d != "" {
		if !filepath.IsAbs(d) {
			d = filepath.Join(filepath.Dir(configPath), d)
		}
		plan.Dir = filepath.Clean(d)
	}
	for _, p := range cfg.Python.Packages {
		if !slices.Contains(plan.Packages, p) {
			plan.Packages = append(plan.Packages, p)
		}
	}
	return plan, nil
}

// Build runs the build of plan, writing what it does to out. It rebuilds only when the script or
// the package list changed since the last build of plan.Dir, and replaces the folder whole, so a
// build that fails leaves the rootfs of before. It needs root (debootstrap) and the Debian mirror.
func Build(ctx context.Context, plan Plan, out io.Writer) error {
	f, err := os.CreateTemp("", "toolhost-rootfs-*.sh")
	if err != nil {
		return fmt.Errorf("writing the rootfs build script: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(buildScript); err != nil {
		f.Close()
		return fmt.Errorf("writing the rootfs build script: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing the rootfs build script: %w", err)
	}
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{f.Name(), plan.Dir}, plan.Packages...)...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building the rootfs in %s failed (%w); what the build printed is above", plan.Dir, err)
	}
	return nil
}
