package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/plugins"
	"github.com/toolhost/toolhost/sdk"
)

const pluginsUsage = `Usage:
  toolhost plugins pin NAME [--config FILE]   start the plugin of kind NAME once, show its hash, version and
                                              protocol, and write its pin into FILE's [plugins.sha256] (kept
                                              by upgrades), or into the pins file ([plugins] sha256_file,
                                              replaced by upgrades) when that already pins NAME
  toolhost plugins list [--config FILE]       every plugin and pinned kind: pin state, version, protocol

FILE is /etc/toolhost/toolhost.toml unless given. Exit codes: 0 ok, 1 something is wrong, 2 usage.
`

// kindRE is what a kind's name may be (as config's tool and kind names).
var kindRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,40}$`)

// runPlugins is `toolhost plugins pin|list`.
func runPlugins(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, "toolhost plugins: say what to do, pin or list\n\n"+pluginsUsage)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, pluginsUsage)
		return 0
	case "pin":
		return runPluginsPin(args[1:], stdout, stderr)
	case "list":
		return runPluginsList(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "toolhost plugins: %q is not a plugins command\n\n%s", args[0], pluginsUsage)
	return 2
}

// parsePluginsFlags parses --config and the positional arguments, which
// may come before or after it ("pin NAME --config F" and "pin --config F
// NAME" alike).
func parsePluginsFlags(name string, args []string, stderr io.Writer) (path string, rest []string, ok bool) {
	fs := flag.NewFlagSet("plugins "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&path, "config", defaultConfig, "the config file")
	for {
		if err := fs.Parse(args); err != nil {
			return "", nil, false
		}
		if fs.NArg() == 0 {
			return path, rest, true
		}
		rest = append(rest, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// loadForPlugins loads the config as pin and list need it: a pins file
// not made yet is no error (pin makes it).
func loadForPlugins(cmd, path string, stderr io.Writer) (*config.Config, bool) {
	cfg, err := config.LoadForPins(path)
	if err != nil {
		var ce config.Errors
		if errors.As(err, &ce) {
			for _, e := range ce {
				fmt.Fprintln(stderr, e.Error())
			}
			fmt.Fprintf(stderr, "toolhost plugins %s: %s has %d problem(s): fix them first\n", cmd, path, len(ce))
		} else {
			fmt.Fprintf(stderr, "toolhost plugins %s: %v\n", cmd, err)
		}
		return nil, false
	}
	return cfg, true
}

// pluginOptions are the plugin manager's options for cfg, as serve has
// them, with only the given pins.
func pluginOptions(cfg *config.Config, pins map[string]string) plugins.Options {
	opts := plugins.Options{
		Dir:          cfg.Plugins.Dir,
		Pins:         pins,
		StartTimeout: time.Duration(cfg.Plugins.StartTimeoutSeconds) * time.Second,
		PinsHint:     "[plugins.sha256] in " + cfg.File,
	}
	if cfg.Plugins.SHA256File != "" {
		if _, err := os.Lstat(cfg.Plugins.SHA256File); err == nil {
			opts.PinsFile = cfg.Plugins.SHA256File
		}
	}
	return opts
}

// signalContext ends on SIGINT or SIGTERM, or after a bound.
func signalContext(bound time.Duration) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(ctx, bound)
	return ctx, func() { cancel(); stop() }
}

// runPluginsPin is `toolhost plugins pin NAME [--config FILE]`.
func runPluginsPin(args []string, stdout, stderr io.Writer) int {
	path, kind, ok := pinArgs(args, stderr)
	if !ok {
		return 2
	}
	cfg, ok := loadForPlugins("pin", path, stderr)
	if !ok {
		return 1
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "toolhost plugins pin: "+format+"\n", a...)
		return 1
	}
	bin := filepath.Join(cfg.Plugins.Dir, plugins.BinaryPrefix+kind)
	sum, err := hashFile(bin)
	if errors.Is(err, os.ErrNotExist) {
		return fail("there is no %s in %s ([plugins] dir of %s); %s", filepath.Base(bin), cfg.Plugins.Dir, cfg.File, whatIsIn(cfg.Plugins.Dir))
	}
	if err != nil {
		return fail("the %s plugin %s can't be read: %v", kind, bin, err)
	}
	target, pinned, inFile, err := pinPlace(cfg, kind)
	if err != nil {
		return fail("%v", err)
	}
	ctx, cancel := signalContext(2 * time.Minute)
	defer cancel()
	probe, err := plugins.ProbeOne(ctx, pluginOptions(cfg, map[string]string{kind: sum}), kind)
	if err != nil {
		return fail("%v\n%s was not pinned; nothing was written to %s", err, kind, target.File)
	}
	if probe.SHA256 != sum {
		// The file changed between the hash and the start: ProbeOne ran
		// what matched the pin, so this can't be; refuse all the same.
		return fail("the %s plugin %s changed while it was being pinned; nothing was written: run this again", kind, bin)
	}
	printProbe(stdout, probe)
	if pinned && target.SHA256 == sum {
		fmt.Fprintf(stdout, "%s is already pinned to this hash in %s:%d; nothing was changed\n", kind, target.File, target.Line)
		return 0
	}
	if err := writePin(stdout, cfg, kind, sum, target, pinned, inFile); err != nil {
		return fail("%v", err)
	}
	return 0
}

// pinArgs reads the arguments of `toolhost plugins pin`: the config file
// and the one kind to pin. What is wrong with them is told on stderr.
func pinArgs(args []string, stderr io.Writer) (path, kind string, ok bool) {
	path, rest, ok := parsePluginsFlags("pin", args, stderr)
	if !ok {
		return "", "", false
	}
	if len(rest) != 1 {
		fmt.Fprintf(stderr, "toolhost plugins pin: name one kind, e.g. toolhost plugins pin weather (got %d arguments)\n", len(rest))
		return "", "", false
	}
	kind = rest[0]
	if !kindRE.MatchString(kind) {
		fmt.Fprintf(stderr, "toolhost plugins pin: %q is not a kind name: a kind's name starts with a lowercase letter, followed by up to 40 lowercase letters, digits or underscores (its plugin is %sNAME)\n",
			kind, plugins.BinaryPrefix)
		return "", "", false
	}
	return path, kind, true
}

// pinPlace is where kind's pin goes: a kind the pins file pins (a
// built-in one, pinned by `make build` or the package) stays there; any
// other goes into the main config's [plugins.sha256], the admin's file,
// which an upgrade keeps (the pins file it replaces). pinned says kind has
// a pin already (target.SHA256), inFile that it is in the pins file.
func pinPlace(cfg *config.Config, kind string) (target config.PinPlace, pinned, inFile bool, err error) {
	mainSum, mainLine, inMain := cfg.MainFilePin(kind)
	filePin, inFile, err := cfg.PinsFilePin(kind)
	if err != nil {
		return config.PinPlace{}, false, false, fmt.Errorf("%w; nothing was written", err)
	}
	if inMain && inFile {
		return config.PinPlace{}, false, false, fmt.Errorf("%s is pinned twice, in %s:%d ([plugins.sha256]) and in %s:%d; a kind is pinned in one place: remove one of the two lines "+
			"(keep the pins file's for a kind that comes with toolhost, the config's for any other: upgrades replace the pins file) and run this again; nothing was written",
			kind, cfg.File, mainLine, filePin.File, filePin.Line)
	}
	target = config.PinPlace{File: cfg.File, Line: mainLine, SHA256: mainSum}
	if inFile {
		target = filePin
	}
	return target, inMain || inFile, inFile, nil
}

// writePin writes kind's new pin sum at target (the pins file when inFile,
// else the main config) and says on stdout what changed and when it counts.
func writePin(stdout io.Writer, cfg *config.Config, kind, sum string, target config.PinPlace, pinned, inFile bool) error {
	var line int
	var err error
	if inFile {
		line, err = config.WritePin(target.File, kind, sum)
	} else {
		line, err = config.WriteMainPin(cfg.File, kind, sum)
	}
	if err != nil {
		return err
	}
	was := ""
	if pinned {
		was = fmt.Sprintf(" (it was %s…)", target.SHA256[:12])
	}
	where := "the config's [plugins.sha256], kept by upgrades"
	if inFile {
		where = "the pins file, where the kind was pinned"
	}
	fmt.Fprintf(stdout, "pinned: %s = %q in %s:%d, %s%s\n", kind, sum, target.File, line, where, was)
	fmt.Fprintln(stdout, "a running host goes by the new pin from its next start (systemctl restart toolhost): a reload starts no plugin")
	return nil
}

// printProbe shows what a plugin said of itself.
func printProbe(w io.Writer, p plugins.Probe) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "kind\t%s\n", p.Kind)
	fmt.Fprintf(tw, "version\t%s\n", orDash(p.Info.Version))
	fmt.Fprintf(tw, "protocol\t%d (this host speaks %d to %d)\n", p.Protocol, sdk.MinProtocolVersion, sdk.ProtocolVersion)
	fmt.Fprintf(tw, "sha256\t%s\n", p.SHA256)
	fmt.Fprintf(tw, "binary\t%s\n", p.Path)
	_ = tw.Flush()
}

// hashFile is the SHA-256 of a regular file, read only: nothing is run.
func hashFile(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("it is not a file")
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// pluginFiles lists the kinds of the toolhost-plugin-* files in dir.
func pluginFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var kinds []string
	for _, e := range entries {
		if k, ok := strings.CutPrefix(e.Name(), plugins.BinaryPrefix); ok && !e.IsDir() {
			kinds = append(kinds, k)
		}
	}
	return kinds, nil
}

// whatIsIn says which plugins a folder holds, for a message.
func whatIsIn(dir string) string {
	kinds, err := pluginFiles(dir)
	switch {
	case err != nil:
		return fmt.Sprintf("and the folder can't be read: %v", err)
	case len(kinds) == 0:
		return "the folder holds no plugins (" + plugins.BinaryPrefix + "KIND): copy the plugin there first"
	}
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = plugins.BinaryPrefix + k
	}
	return "it holds " + strings.Join(names, ", ") + " (kinds " + strings.Join(kinds, ", ") + ")"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// pluginRow is one line of `toolhost plugins list`.
type pluginRow struct {
	kind, state, version, protocol string
	// problem is what is wrong, said below the table.
	problem string
}

// runPluginsList is `toolhost plugins list [--config FILE]`. It starts
// only the plugins whose binary matches its pin, each once, to ask it
// what it is; an unpinned binary is never run.
func runPluginsList(args []string, stdout, stderr io.Writer) int {
	path, rest, ok := parsePluginsFlags("list", args, stderr)
	if !ok {
		return 2
	}
	if len(rest) > 0 {
		fmt.Fprintf(stderr, "toolhost plugins list: unexpected argument %q (the config is given with --config FILE)\n", rest[0])
		return 2
	}
	cfg, ok := loadForPlugins("list", path, stderr)
	if !ok {
		return 1
	}
	bad := false
	if f := cfg.Plugins.SHA256File; f != "" {
		if _, err := os.Lstat(f); errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(stderr, "toolhost plugins list: the pins file %s ([plugins] sha256_file of %s) does not exist, so toolhost serve would not start: "+
				"`toolhost plugins pin KIND` makes it\n", f, cfg.File)
			bad = true
		}
	}
	files, err := pluginFiles(cfg.Plugins.Dir)
	if err != nil {
		fmt.Fprintf(stderr, "toolhost plugins list: the plugin folder %s ([plugins] dir of %s) can't be read: %v\n", cfg.Plugins.Dir, cfg.File, err)
		bad = true
	}
	present := map[string]bool{}
	kinds := append([]string(nil), files...)
	for _, k := range files {
		present[k] = true
	}
	for k := range cfg.Plugins.SHA256 {
		if !present[k] {
			kinds = append(kinds, k)
		}
	}
	sort.Strings(kinds)
	opts := pluginOptions(cfg, nil)
	trust := plugins.CheckTrust(opts)
	if trust != nil {
		fmt.Fprintf(stderr, "toolhost plugins list: %v\n", trust)
		bad = true
	}
	ctx, cancel := signalContext(5 * time.Minute)
	defer cancel()
	rows := make([]pluginRow, 0, len(kinds))
	for _, kind := range kinds {
		row := listOne(ctx, cfg, opts, kind, present[kind], trust)
		if row.problem != "" {
			bad = true
		}
		rows = append(rows, row)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tPIN\tVERSION\tPROTOCOL")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.kind, r.state, r.version, r.protocol)
	}
	_ = tw.Flush()
	if len(rows) == 0 {
		fmt.Fprintf(stdout, "no plugins in %s and no pins in %s\n", cfg.Plugins.Dir, cfg.File)
	}
	for _, r := range rows {
		if r.problem != "" {
			fmt.Fprintf(stdout, "%s: %s\n", r.kind, r.problem)
		}
	}
	if bad {
		return 1
	}
	return 0
}

// listOne is the row of one kind: its pin state, and what it says of
// itself when its binary matches its pin (it is then started once).
func listOne(ctx context.Context, cfg *config.Config, opts plugins.Options, kind string, present bool, trust error) pluginRow {
	row := pluginRow{kind: kind, version: "-", protocol: "-"}
	pin, pinned := cfg.Plugins.SHA256[kind]
	bin := filepath.Join(cfg.Plugins.Dir, plugins.BinaryPrefix+kind)
	switch {
	case !present:
		row.state = "pinned but missing"
		row.problem = fmt.Sprintf("pinned, but there is no %s in %s: copy the plugin there, or remove its pin", filepath.Base(bin), cfg.Plugins.Dir)
		return row
	case !pinned:
		row.state = "not pinned"
		row.version = "not started: not pinned"
		row.problem = fmt.Sprintf("not pinned, so toolhost does not start it: if you trust %s, run: toolhost plugins pin %s --config %s", bin, kind, cfg.File)
		return row
	}
	sum, err := hashFile(bin)
	if err != nil {
		row.state = "pinned"
		row.version = "not started"
		row.problem = fmt.Sprintf("%s can't be read: %v", bin, err)
		return row
	}
	if sum != pin {
		row.state = "hash differs"
		row.version = "not started: hash differs"
		row.problem = fmt.Sprintf("%s has SHA-256 %s…, its pin says %s…, so toolhost does not start it: if you trust the new binary, run: toolhost plugins pin %s --config %s",
			bin, sum[:12], pin[:12], kind, cfg.File)
		return row
	}
	row.state = "pinned"
	if trust != nil {
		row.version = "not started"
		row.problem = "not started: the plugin folder or pins file is not safe (above)"
		return row
	}
	opts.Pins = map[string]string{kind: pin}
	probe, err := plugins.ProbeOne(ctx, opts, kind)
	if err != nil {
		row.version = "did not start"
		row.problem = err.Error()
		return row
	}
	row.version = orDash(probe.Info.Version)
	row.protocol = fmt.Sprint(probe.Protocol)
	return row
}
