// Command packages prints the Debian packages of a toolhost config's [python] packages, one a
// line, for the rootfs build (runsc/runsc.mk). A missing config file means no extra packages.
package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/pelletier/go-toml/v2"
)

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

// packages reads [python] packages from a toolhost config; other tables and keys are not this
// program's business and are ignored.
func packages(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
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
	return cfg.Python.Packages, nil
}
