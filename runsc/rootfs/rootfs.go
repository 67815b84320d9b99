// Package rootfs builds the root filesystems the python kind's sandboxes run on: a minimal Debian
// with python3, pip and the Debian packages a toolhost config's [python] packages names (the
// rootfs of one-shot tool runs), and the same with [python] session_packages besides (the
// conversation sandboxes' session rootfs: the scientific stack by default). The build itself is
// build.sh (debootstrap from this machine's Debian mirror, then apt in the new tree for the
// packages, trimmed of what a sandbox never reads), embedded here so that an installed toolhost carries it; `make rootfs` and `toolhost rootfs`
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
	"regexp"
	"slices"

	"github.com/pelletier/go-toml/v2"
)

//go:embed build.sh
var buildScript []byte

// DefaultDir is where the rootfs is when [python] rootfs does not say.
const DefaultDir = "/var/lib/toolhost/rootfs"

// DefaultSessionDir is where the session rootfs is when [python] rootfs and session_rootfs do
// not say: SessionDirFor(DefaultDir).
const DefaultSessionDir = "/var/lib/toolhost/rootfs-sessions"

// SessionDirFor is the session rootfs's folder when [python] session_rootfs does not say: the
// rootfs's with "-sessions" added (build/rootfs, build/rootfs-sessions).
func SessionDirFor(rootfs string) string {
	return filepath.Clean(rootfs) + "-sessions"
}

// DefaultSessionPackages are [python] session_packages when the config does not say: what a
// conversation's first import of them would otherwise cost it from the package hosts. munkres
// is there for matplotlib's fonttools, which needs it or scipy: named, it keeps scipy out, and
// with scipy pythran, g++ and the Python headers (the rootfs is 574 MB with it, 1.3 GB without).
var DefaultSessionPackages = []string{"python3-numpy", "python3-pandas", "python3-matplotlib", "python3-munkres"}

// packageName is a Debian package's name as build.sh takes it (it refuses any other).
var packageName = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)

// IsPackageName says whether p is a Debian package's name that a build takes.
func IsPackageName(p string) bool { return packageName.MatchString(p) }

// basePackages are in every rootfs, whatever the config says: pip, so that a conversation's
// sandbox can pip install from the package hosts its egress proxy allows. python3 itself and a
// shell (bash, coreutils) come with the minimal Debian the build starts from.
var basePackages = []string{"python3-pip"}

// Plan is what a build makes: the folder and the Debian packages besides python3.
type Plan struct {
	Dir      string
	Packages []string
}

// Plans are the two builds of a config: the rootfs of one-shot tool runs and the session rootfs
// of conversation sandboxes, which has the rootfs's packages and the session packages.
type Plans struct {
	Rootfs, Sessions Plan
}

// PlanFor reads [python] rootfs, packages, session_rootfs and session_packages of a toolhost
// config (relative paths are relative to the config's folder, as toolhost reads them). A missing
// config, or a key left out, means the defaults; other tables and keys are not this package's
// business and are ignored.
func PlanFor(configPath string) (Plans, error) {
	plans := Plans{Rootfs: Plan{Dir: DefaultDir, Packages: slices.Clone(basePackages)},
		Sessions: Plan{Dir: DefaultSessionDir}}
	var cfg struct {
		Python struct {
			Rootfs          string    `toml:"rootfs"`
			Packages        []string  `toml:"packages"`
			SessionRootfs   string    `toml:"session_rootfs"`
			SessionPackages *[]string `toml:"session_packages"`
		} `toml:"python"`
	}
	data, err := os.ReadFile(configPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return Plans{}, fmt.Errorf("reading the config for the rootfs: %w", err)
	default:
		if err := toml.Unmarshal(data, &cfg); err != nil {
			return Plans{}, fmt.Errorf("reading [python] rootfs and packages from %s: %w", configPath, err)
		}
	}
	dir := func(d, def string) string {
		if d == "" {
			return def
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(filepath.Dir(configPath), d)
		}
		return filepath.Clean(d)
	}
	plans.Rootfs.Dir = dir(cfg.Python.Rootfs, DefaultDir)
	plans.Sessions.Dir = dir(cfg.Python.SessionRootfs, SessionDirFor(plans.Rootfs.Dir))
	plans.Rootfs.Packages = addPackages(plans.Rootfs.Packages, cfg.Python.Packages)
	session := DefaultSessionPackages
	if cfg.Python.SessionPackages != nil {
		session = *cfg.Python.SessionPackages
	}
	plans.Sessions.Packages = addPackages(slices.Clone(plans.Rootfs.Packages), session)
	if plans.Sessions.Dir == plans.Rootfs.Dir {
		return Plans{}, fmt.Errorf("[python] session_rootfs in %s is the rootfs's folder %s: give the conversation sandboxes' rootfs a folder of its own", configPath, plans.Rootfs.Dir)
	}
	return plans, nil
}

// AddPackages adds packages to both plans (those given on the command line), each once.
func (p *Plans) AddPackages(packages []string) {
	p.Rootfs.Packages = addPackages(p.Rootfs.Packages, packages)
	p.Sessions.Packages = addPackages(p.Sessions.Packages, packages)
}

// addPackages appends to list the packages it does not have yet.
func addPackages(list, packages []string) []string {
	for _, p := range packages {
		if !slices.Contains(list, p) {
			list = append(list, p)
		}
	}
	return list
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
