// Command packages prints the Debian packages the sandboxes' rootfs is built with, one a line,
// for the rootfs build (runsc/runsc.mk): those every rootfs has (python3-pip, so that a
// conversation's sandbox can pip install from the package hosts its egress proxy allows) and
// those of a toolhost config's [python] packages. A missing config file means no extra packages.
package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"

	"github.com/pelletier/go-toml/v2"
)

// basePackages are in every rootfs, whatever the config says. python3 itself and a shell
// (bash, coreutils) come with the minimal Debian the build starts from.
var basePackages = []string{"python3-pip"}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: packages CONFIG.toml")
		os.Exit(2)
	}
	pkgs, err := packages(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, p := range pkgs {
		fmt.Println(p)
	}
}

// packages returns basePackages and then [python] packages of a toolhost config, each once;
// other tables and keys are not this program's business and are ignored.
func packages(path string) ([]string, error) {
	out := slices.Clone(basePackages)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the config for the rootfs packages: %w", err)
	}
	var cfg struct {
		Python struct {
			Packages []string `toml:"packages"`
		} `toml:"python"`
	}
	if err := toml.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("reading [python] packages from %s: %w", path, err)
	}
	for _, p := range cfg.Python.Packages {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}
