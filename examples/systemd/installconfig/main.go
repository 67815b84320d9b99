// Command installconfig writes the toolhost.toml that `make install` and the Debian package put in
// /etc/toolhost: examples/toolhost.toml, comments and all, with its paths set to the installed
// layout and its logs in JSON for journald. It changes only the keys it names and fails when one of
// them is missing from the example, so the installed config can't silently keep a path of the
// source tree.
//
//	go run ./examples/systemd/installconfig -libdir /usr/lib/toolhost < examples/toolhost.toml
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

func main() {
	libdir := flag.String("libdir", "/usr/local/lib/toolhost", "where the plugins, their pins and runsc are installed")
	confdir := flag.String("confdir", "/etc/toolhost", "the folder of the installed config")
	statedir := flag.String("statedir", "/var/lib/toolhost", "the host's state folder; the rootfs is built in it")
	flag.Parse()
	if err := rewrite(os.Stdin, os.Stdout, settings(*libdir, *confdir, *statedir)); err != nil {
		fmt.Fprintf(os.Stderr, "installconfig: %v\n", err)
		os.Exit(1)
	}
}

// settings are the installed values, by "table.key" ("" table: the top level).
func settings(libdir, confdir, statedir string) map[string]string {
	return map[string]string{
		".tools_dir":          confdir + "/tools",
		"server.state_dir":    statedir,
		"plugins.dir":         libdir + "/plugins",
		"plugins.sha256_file": libdir + "/pins.toml",
		"python.runsc":        libdir + "/runsc",
		"python.rootfs":       statedir + "/rootfs",
		"python.state_dir":    "/run/toolhost",
		"python.sessions_dir": statedir + "/sessions",
		"log.format":          "json",
	}
}

const header = "# toolhost.toml — the config of the installed toolhost (`systemctl reload toolhost` applies a change)."

var (
	tableLine = regexp.MustCompile(`^\[([A-Za-z0-9_.]+)\]\s*(#.*)?$`)
	keyLine   = regexp.MustCompile(`^([A-Za-z0-9_]+)\s*=`)
)

// rewrite copies in to out, replacing the first line with header and the values of want.
func rewrite(in io.Reader, out io.Writer, want map[string]string) error {
	sc := bufio.NewScanner(in)
	w := bufio.NewWriter(out)
	table, first := "", true
	done := map[string]bool{}
	for sc.Scan() {
		line := sc.Text()
		if first {
			first = false
			if strings.HasPrefix(line, "#") {
				line = header
			}
		}
		if m := tableLine.FindStringSubmatch(line); m != nil {
			table = m[1]
		} else if m := keyLine.FindStringSubmatch(line); m != nil {
			key := table + "." + m[1]
			if v, ok := want[key]; ok {
				line = m[1] + " = " + strconv.Quote(v)
				done[key] = true
			}
		}
		fmt.Fprintln(w, line)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading the example config: %w", err)
	}
	var missing []string
	for k := range want {
		if !done[k] {
			missing = append(missing, strings.TrimPrefix(k, "."))
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("the example config no longer sets %s; set them there (uncommented) so the installed config can point them at the installed files", strings.Join(missing, ", "))
	}
	return w.Flush()
}
