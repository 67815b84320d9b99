package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/toolhost/toolhost/config"
)

// reloadWait bounds how long `toolhost reload` waits for the host's answer:
// a reload starts no plugin, but re-checks every tool with its kind (a python
// tool in a sandbox: minutes on a slow machine). Less than the unit's
// TimeoutStartSec (examples/systemd/toolhost.service), which bounds
// ExecReload too.
const reloadWait = 4 * time.Minute

// runReload is `toolhost reload [--config FILE] [--pid PID]`, the unit's
// ExecReload. It asks the host with SIGHUP to reload FILE and waits until the
// host applied or refused it (the counts in /healthz), so that `systemctl
// reload` returns once the change is served, and fails, saying so, when the
// host refused the config and serves on with the one before. PID is the
// host's process; under systemd, $MAINPID says it.
func runReload(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("reload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", defaultConfig, "the config the host serves")
	pid := fs.Int("pid", 0, "the host's process id (default: $MAINPID, which systemd sets)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "toolhost reload: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *pid == 0 {
		if n, err := strconv.Atoi(os.Getenv("MAINPID")); err == nil {
			*pid = n
		}
	}
	if *pid <= 0 {
		fmt.Fprintln(stderr, "toolhost reload: which host? give --pid PID (under systemd, $MAINPID says it)")
		return 2
	}
	cfg, err := config.Load(*path)
	if err != nil {
		printConfigErrors(stderr, "toolhost reload", err)
		fmt.Fprintf(stderr, "toolhost reload: %s has problems, so the host was not asked to reload; it serves on with the config it has\n", *path)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), reloadWait)
	defer cancel()
	url := "http://" + dialAddr(cfg.Server.Listen) + "/healthz"
	client := &http.Client{Timeout: 5 * time.Second}
	before, err := readHealth(ctx, client, url)
	if err != nil {
		fmt.Fprintf(stderr, "toolhost reload: can't ask the host how its reloads went (%v); is it serving [server] listen = %q? (a change of listen takes a restart)\n", err, cfg.Server.Listen)
		return 1
	}
	if err := syscall.Kill(*pid, syscall.SIGHUP); err != nil {
		fmt.Fprintf(stderr, "toolhost reload: can't signal the host (process %d): %v\n", *pid, err)
		return 1
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintf(stderr, "toolhost reload: the host did not say within %s whether it applied %s; see its log (journalctl -u toolhost)\n", reloadWait, *path)
			return 1
		case <-tick.C:
		}
		now, err := readHealth(ctx, client, url)
		if err != nil {
			continue
		}
		switch {
		case now.Refused > before.Refused:
			fmt.Fprintf(stderr, "toolhost reload: the host refused %s and serves on with the config it had; its log says why (journalctl -u toolhost)\n", *path)
			return 1
		case now.Applied > before.Applied:
			fmt.Fprintf(stdout, "toolhost reload: the host serves %s\n", *path)
			return 0
		}
	}
}

// health is what /healthz says of reloads and of the store
// (docs/protocol.md).
type health struct {
	Status  string `json:"status"`
	Applied uint64 `json:"reloads"`
	Refused uint64 `json:"reloads_refused"`
	// Store is "ok", "unavailable", or "" from a host without a store.
	Store string `json:"store"`
}

// readHealth asks the host's /healthz at url: an error unless it answers
// 200 with its JSON, or 503 saying only its store is unavailable. That
// host serves, and picks its database up by itself once it is back: its
// reload counts are good, and restarting it (the watchdog) would not
// bring the database back, only cut the runs going on. A host draining
// before it stops answers 503 too, and the error says so.
func readHealth(ctx context.Context, client *http.Client, url string) (health, error) {
	var h health
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return h, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable {
		return h, fmt.Errorf("%s answered %s", url, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&h); err != nil {
		return h, fmt.Errorf("reading %s: %w", url, err)
	}
	switch {
	case h.Status == "draining":
		return h, fmt.Errorf("%s answered %s: the host is stopping (it drains, [server] drain_seconds, then exits)", url, resp.Status)
	case resp.StatusCode != http.StatusOK && h.Store != "unavailable":
		return h, fmt.Errorf("%s answered %s", url, resp.Status)
	}
	return h, nil
}

// dialAddr is a listen address as this machine dials it: no host or an
// unspecified one (":8080", "0.0.0.0:8080") becomes loopback.
func dialAddr(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, port)
}
