package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/toolhost/toolhost/host/plugins"
)

// rootfsBuilder is the name of the python kind's rootfs builder, installed
// beside the plugins' folder ([plugins] dir/../toolhost-rootfs).
const rootfsBuilder = "toolhost-rootfs"

// runRootfs is `toolhost rootfs [--config FILE] [PACKAGE...]`: it builds the
// root filesystem the python kind's sandboxes run on, at the config's
// [python] rootfs, with its [python] packages and the PACKAGEs given. The
// building is the python kind's, not the host's (the host binary carries no
// sandbox code): this runs the builder installed beside the plugins, after
// the same checks of who may change it as the plugins get.
func runRootfs(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("rootfs", flag.ContinueOnError)
	flags.SetOutput(stderr)
	path := flags.String("config", defaultConfig, "the config whose [python] rootfs and packages are built")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	packages := flags.Args()
	cfg, ok := loadConfig("rootfs", []string{"--config", *path}, stderr)
	if !ok {
		return 2
	}
	builder := filepath.Join(filepath.Dir(cfg.Plugins.Dir), rootfsBuilder)
	if err := trustedExecutable(builder); err != nil {
		fmt.Fprintf(stderr, "toolhost rootfs: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := exec.CommandContext(ctx, builder, append([]string{"--config", cfg.File}, packages...)...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		fmt.Fprintf(stderr, "toolhost rootfs: running %s: %v\n", builder, err)
		return 1
	}
	return 0
}

// trustedExecutable refuses a builder that is missing, is not an
// executable file, or that anyone but root and this user could change
// (plugins.CheckNotWritableByOthers, as for the plugins): it is about to
// run as this user, most often root.
func trustedExecutable(path string) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s is missing: it is installed beside the plugins' folder ([plugins] dir) by `make install` or the Debian package (`make build` puts it in bin/)", path)
	}
	if err != nil {
		return err
	}
	if err := plugins.CheckNotWritableByOthers(path, "the rootfs builder"); err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o100 == 0 {
		return fmt.Errorf("%s is not an executable file", path)
	}
	return nil
}
