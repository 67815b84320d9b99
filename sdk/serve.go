package sdk

import (
	"os"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
)

// Serve runs kind as a plugin process: it does the go-plugin handshake
// (gRPC only) and serves until the host stops it. Call it first thing in
// main: nothing may be written to stdout before the handshake. Logs go to
// stderr as hclog JSON, which the host reads into its own log.
func Serve(kind Kind) {
	logger := hclog.New(&hclog.LoggerOptions{
		Name:       "plugin",
		Output:     os.Stderr,
		JSONFormat: true,
		Level:      hclog.Info,
	})
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: pluginSets(kind, nil, logger),
		GRPCServer:       plugin.DefaultGRPCServer,
		Logger:           logger,
	})
}

// Logger returns an hclog logger writing JSON to stderr, which the host
// reads into its own log with the plugin's name.
func Logger(name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: name, Output: os.Stderr, JSONFormat: true, Level: hclog.Info})
}
