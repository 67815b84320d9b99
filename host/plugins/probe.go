package plugins

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/toolhost/toolhost/sdk"
)

// Probe is what a plugin said of itself when it was started once to be
// asked (ProbeOne).
type Probe struct {
	Kind string
	// Path is the plugin's binary.
	Path string
	// SHA256 is the hex SHA-256 of the bytes that ran, checked against
	// the pin.
	SHA256 string
	// Info is the plugin's Describe.
	Info sdk.Info
	// Protocol is the plugin protocol version negotiated with it.
	Protocol int
}

// ProbeOne starts the plugin of one kind, toolhost-plugin-KIND in
// opts.Dir, once, through every check Start makes (the plugin folder and
// pins file not writable by others; the binary's owner and mode; its
// sealed copy hashed and checked against opts.Pins[kind]), asks it to
// describe itself without configuring it, and stops it. The plugins of
// other kinds in the folder are not touched. An unpinned binary is never
// run: pin it in opts.Pins first.
func ProbeOne(ctx context.Context, opts Options, kind string) (Probe, error) {
	opts.NoConfigure = true
	opts.CheckOnly = true
	opts.Host = nil
	m := NewManager(opts)
	if err := m.checkTrust(); err != nil {
		return Probe{}, err
	}
	p := &Plugin{kind: kind, path: filepath.Join(m.opts.Dir, BinaryPrefix+kind), m: m, up: make(chan struct{})}
	if err := p.start(ctx); err != nil {
		return Probe{}, err
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	defer p.stop(stopCtx)
	if p.Protocol() == 0 {
		return Probe{}, fmt.Errorf("the %s plugin %s started but negotiated no protocol version", kind, p.path)
	}
	return Probe{Kind: kind, Path: p.path, SHA256: p.SHA256(), Info: p.Info(), Protocol: p.Protocol()}, nil
}

// CheckTrust says what is wrong when the plugin folder of opts, or its
// pins file, could be changed by others than root and the host's user:
// then no plugin of it is started.
func CheckTrust(opts Options) error {
	return NewManager(opts).checkTrust()
}
