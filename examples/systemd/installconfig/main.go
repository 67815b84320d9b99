// Command installconfig writes the toolhost.toml that `make install` and the Debian package put in
// /etc/toolhost: examples/toolhost.toml, comments and all, with its paths set to the installed
// layout and its logs in JSON for journald. It changes only the keys it names and fails when one of
// them is missing from the example, so the installed config can't silently keep a path of the
// source tree.
//
//	go run ./examples/systemd/installconfig -libdir /usr/lib/toolhost < examples/toolhost.toml
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/toolhost/toolhost/config"
)

func main() {
	libdir := flag.String("libdir", "/usr/local/lib/toolhost", "where the plugins, their pins and runsc are installed")
	confdir := flag.String("confdir", "/etc/toolhost", "the folder of the installed config")
	statedir := flag.String("statedir", "/var/lib/toolhost", "the host's state folder; the rootfs and the session rootfs are built in it")
	flag.Parse()
	if err := rewrite(os.Stdin, os.Stdout, settings(*libdir, *confdir, *statedir)); err != nil {
		fmt.Fprintf(os.Stderr, "installconfig: %v\n", err)
		os.Exit(1)
	}
}

// settings are the installed values, by "table.key" ("" table: the top level).
func settings(libdir, confdir, statedir string) map[string]string {
	return map[string]string{
		".tools_dir":            confdir + "/tools",
		"server.state_dir":      statedir,
		"plugins.dir":           libdir + "/plugins",
		"plugins.sha256_file":   libdir + "/pins.toml",
		"python.runsc":          libdir + "/runsc",
		"python.rootfs":         statedir + "/rootfs",
		"python.session_rootfs": statedir + "/rootfs-sessions",
		"python.state_dir":      "/run/toolhost",
		"python.sessions_dir":   statedir + "/sessions",
		"log.format":            "json",
	}
}

const header = "# toolhost.toml — the config of the installed toolhost (`systemctl reload toolhost` applies a change)."

// rewrite copies in to out, replacing the first line with header and the values of want.
func rewrite(in io.Reader, out io.Writer, want map[string]string) error {
	example, err := io.ReadAll(in)
	if err != nil {
		return fmt.Errorf("reading the example config: %w", err)
	}
	text := string(example)
	if strings.HasPrefix(text, "#") {
		_, rest, _ := strings.Cut(text, "\n")
		text = header + "\n" + rest
	}
	values := make(map[string]string, len(want))
	for k, v := range want {
		values[k] = strconv.Quote(v)
	}
	text, err = config.SetValues(text, values)
	if err != nil {
		return fmt.Errorf("examples/toolhost.toml: %w; set them there so the installed config can point them at the installed files", err)
	}
	_, err = io.WriteString(out, text)
	return err
}
