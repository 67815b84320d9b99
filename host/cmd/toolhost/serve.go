package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/hashicorp/go-hclog"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
)

// exitConfig is serve's exit status when the config has problems: 78, the
// EX_CONFIG of sysexits.h. The unit does not restart on it (restarting would
// not help); it is not 2, which is also a Go panic's and a SIGABRT's (the
// watchdog's signal), after which the unit must restart.
const exitConfig = 78

func runServe(args []string, _, stderr io.Writer) int {
	cfg, ok := loadConfig("serve", args, stderr)
	if !ok {
		return exitConfig
	}
	log := newLogger(cfg, stderr)
	if warning := enterDelegatedScope("serve", args, stderr); warning != "" {
		log.Warn(warning)
	}
	// The host lives until ctx ends: at once on a SIGTERM or Ctrl-C while it
	// starts; once it serves, after it drained (drainOnSignal).
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	serving := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			stop()
		case <-serving:
		case <-ctx.Done():
		}
	}()

	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		fmt.Fprintf(stderr, "toolhost: can't listen on %s: %v\n", cfg.Server.Listen, err)
		return 1
	}
	if len(cfg.Tokens) == 0 {
		if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
			ln.Close()
			fmt.Fprintf(stderr, "toolhost: [server] listen = %q reaches beyond this machine, but no [[tokens]] are configured, so anyone could run tools;\n"+
				"  add a [[tokens]] entry (name, sha256, role), or listen on 127.0.0.1\n", cfg.Server.Listen)
			return exitConfig
		}
		log.Warn("NO TOKENS ARE CONFIGURED: every caller on this machine is an admin, and nobody else is served; add [[tokens]] to " + cfg.File + " to require a token")
	} else {
		log.Info("callers need a token", "tokens", len(cfg.Tokens))
	}
	h := host.New(cfg, log)
	if err := h.PrepareState(); err != nil {
		ln.Close()
		fmt.Fprintf(stderr, "toolhost: %v\n", err)
		return 1
	}
	problems := h.Start(ctx)
	if len(problems.Config) > 0 {
		// Values of the file its kinds refused: as when the host's own
		// tables have problems, nothing is served.
		h.Stop()
		ln.Close()
		for _, e := range problems.Config {
			fmt.Fprintln(stderr, e.Error())
		}
		fmt.Fprintf(stderr, "toolhost: %s has %d problem(s); nothing was started\n", cfg.File, len(problems.Config))
		return exitConfig
	}
	for _, p := range problems.Plugins {
		fmt.Fprintf(stderr, "toolhost: %v\n", p.Err)
	}
	for _, e := range problems.Tools {
		fmt.Fprintf(stderr, "toolhost: %s (not served)\n", e.Error())
	}
	log.Info("listening", "addr", "http://"+ln.Addr().String())
	notifyReady(log)
	close(serving)
	alive, draining := context.WithCancel(ctx)
	defer draining()
	go drainOnSignal(ctx, sigs, h, draining, stop, log)
	go reloadOnHangup(ctx, h, cfg.File, log, stderr)
	go keepAlive(alive, ln.Addr(), log)
	if err := h.Serve(ctx, ln); err != nil {
		fmt.Fprintf(stderr, "toolhost: %v\n", err)
		return 1
	}
	return 0
}

// drainOnSignal waits for SIGTERM or Ctrl-C, then drains the host (host.Host.Drain: /healthz
// says "draining" while calls are served, for [server] drain_seconds) and ends its life with
// stop, after which Serve stops it as before. It tells systemd the host is stopping (a SIGTERM
// sent by hand makes systemd wait for it, with TimeoutStopSec, instead of watching /healthz),
// and calls draining when the drain starts, which ends keepAlive. A second signal cuts the
// drain short.
func drainOnSignal(ctx context.Context, sigs <-chan os.Signal, h *host.Host, draining, stop context.CancelFunc, log hclog.Logger) {
	var sig os.Signal
	select {
	case sig = <-sigs:
	case <-ctx.Done():
		return
	}
	defer stop()
	_, _ = daemon.SdNotify(false, daemon.SdNotifyStopping)
	draining()
	log.Info("asked to stop", "signal", sig.String())
	cut, cutShort := context.WithCancel(ctx)
	defer cutShort()
	go func() {
		select {
		case sig := <-sigs:
			log.Info("asked again to stop: not waiting for the drain to end", "signal", sig.String())
			cutShort()
		case <-cut.Done():
		}
	}()
	h.Drain(cut)
}

// reloadOnHangup reloads the config on SIGHUP (`systemctl reload`, whose
// `toolhost reload` waits for the outcome): a config with errors is refused
// whole and the host goes on as it was.
func reloadOnHangup(ctx context.Context, h *host.Host, path string, log hclog.Logger, stderr io.Writer) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		_, _ = daemon.SdNotify(false, daemon.SdNotifyReloading)
		problems, err := h.ReloadFile(ctx, path)
		switch {
		case err != nil:
			var ce config.Errors
			if errors.As(err, &ce) {
				for _, e := range ce {
					fmt.Fprintln(stderr, e.Error())
				}
			}
			log.Error("the new config has problems; still serving the one before", "file", path, "error", err)
		case len(problems.Config) > 0:
			for _, e := range problems.Config {
				fmt.Fprintln(stderr, e.Error())
			}
			log.Error("the new config has problems; still serving the one before", "file", path, "problems", len(problems.Config))
		default:
			for _, e := range problems.Tools {
				fmt.Fprintf(stderr, "toolhost: %s (not served)\n", e.Error())
			}
			log.Info("config reloaded", "file", path, "problems", problems.Count())
		}
		_, _ = daemon.SdNotify(false, daemon.SdNotifyReady)
	}
}

// keepAlive feeds systemd's watchdog (WatchdogSec in the unit) while the
// host's API answers /healthz on its own listener, so that a host which
// stopped serving is killed and restarted instead of hanging. A 503 that
// says only the store is unavailable still feeds it (readHealth): the host
// serves, and a restart would not bring the database back. It does
// nothing when systemd set no watchdog, and ends when the host starts to
// drain (then /healthz answers 503 on purpose, and systemd, told the host
// is stopping, watches no more).
func keepAlive(ctx context.Context, addr net.Addr, log hclog.Logger) {
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil || interval <= 0 {
		return
	}
	every := interval / 3
	client := &http.Client{Timeout: every}
	url := "http://" + dialAddr(addr.String()) + "/healthz"
	t := time.NewTicker(every)
	defer t.Stop()
	log.Info("feeding the systemd watchdog while /healthz answers", "every", every.String())
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := readHealth(ctx, client, url); err != nil {
			log.Warn("not feeding the systemd watchdog: the host's own /healthz did not answer", "error", err)
			continue
		}
		_, _ = daemon.SdNotify(false, daemon.SdNotifyWatchdog)
	}
}

// notifyReady tells systemd (Type=notify) that the host serves.
func notifyReady(log hclog.Logger) {
	if _, err := daemon.SdNotify(false, daemon.SdNotifyReady); err != nil {
		log.Warn("could not tell systemd the host is ready", "error", err)
	}
}
