package sdk

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
)

// Closer is implemented by a kind that holds what must not outlive its
// plugin (sandboxes, child processes, connections). It is optional. Serve
// calls Close once when the plugin stops: when the host stops it (go-plugin
// asks the plugin to exit, and kills it 2 s later if it has not), or on
// SIGTERM (systemctl stop) or SIGINT. ctx ends after CloseTimeout; the
// process exits when Close returns.
type Closer interface {
	Close(ctx context.Context) error
}

// CloseTimeout bounds a Closer's Close.
const CloseTimeout = time.Minute

// Serve runs kind as a plugin process: it does the go-plugin handshake
// (gRPC only) and serves until the host stops it or a signal does, then
// closes the kind (Closer) and returns, or exits. Call it first thing in
// main: nothing may be written to stdout before the handshake. Logs go to
// stderr as hclog JSON, which the host reads into its own log.
func Serve(kind Kind) {
	logger := Logger("plugin")
	var once sync.Once
	shutdown := func(why string) {
		once.Do(func() { closeKind(kind, logger, why) })
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		sig := <-sigs
		shutdown("the plugin got " + sig.String())
		os.Exit(0)
	}()
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: pluginSets(kind, logger),
		GRPCServer:       plugin.DefaultGRPCServer,
		Logger:           logger,
	})
	shutdown("the host stopped the plugin")
}

// closeKind calls kind's Close, if it has one, within CloseTimeout.
func closeKind(kind Kind, logger hclog.Logger, why string) {
	c, ok := kind.(Closer)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), CloseTimeout)
	defer cancel()
	logger.Info("closing the kind", "why", why)
	if err := c.Close(ctx); err != nil {
		logger.Warn("the kind did not close cleanly", "error", err)
	}
}

// Logger returns an hclog logger writing JSON to stderr, which the host
// reads into its own log with the plugin's name.
func Logger(name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: name, Output: os.Stderr, JSONFormat: true, Level: hclog.Info})
}
