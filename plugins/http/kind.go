package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolhost/toolhost/sdk"
)

// version is this kind's own version.
const version = "0.1.0"

// kind is the http kind. Its zero value is ready: until Configure is
// called it uses the default settings.
type kind struct {
	// exempt is one address and port dialled even though it is private,
	// so that tests can have a local server as the allowed first hop. The
	// zero value exempts nothing.
	exempt netip.AddrPort
	// roots are the certificate authorities trusted instead of the
	// system's, so that tests can serve https. nil trusts the system's.
	roots *x509.CertPool

	mu sync.Mutex
	st *state
}

// state is what Configure sets up: the settings, and a transport and a
// guard that keep to them. It is never changed once made.
type state struct {
	cfg       config
	guard     *guard
	transport *http.Transport
	// places holds one token per run sending its request (max_running);
	// waiting counts the runs waiting for one.
	places  chan struct{}
	waiting *atomic.Int64
}

// enter waits for a place among the runs going at once, as long as ctx
// lasts; leave gives it back.
func (st *state) enter(ctx context.Context) (leave func(), err error) {
	select {
	case st.places <- struct{}{}:
		return func() { <-st.places }, nil
	default:
	}
	st.waiting.Add(1)
	defer st.waiting.Add(-1)
	select {
	case st.places <- struct{}{}:
		if ctx.Err() == nil {
			return func() { <-st.places }, nil
		}
		<-st.places // both were ready at once: a run its caller gave up on sends nothing
	case <-ctx.Done():
	}
	return nil, fmt.Errorf("the run waited for one of the %d http runs going at once ([http] max_running) to end, and was stopped: %w",
		cap(st.places), context.Cause(ctx))
}

// Metrics reports the runs waiting for a place.
func (k *kind) Metrics(context.Context) []sdk.Metric {
	return []sdk.Metric{{Name: "http_runs_waiting", Help: "http runs waiting for a place ([http] max_running).",
		Type: "gauge", Value: float64(k.state().waiting.Load())}}
}

// client is the http.Client of one call of the tool p: the shared
// transport, and a redirect policy that knows p's trusted hosts.
func (st *state) client(p *plan) *http.Client {
	return &http.Client{Transport: st.transport, CheckRedirect: redirectPolicy(st.guard, p)}
}

var _ sdk.Kind = (*kind)(nil)

func (k *kind) Describe(context.Context) (sdk.Info, error) {
	// Every answer, and every error, carries a server's words.
	return sdk.Info{Kind: "http", Version: version, RunSchema: json.RawMessage(runSchema), ConfigSchema: json.RawMessage(configSchema), OutsideText: sdk.OutsideTextAlways}, nil
}

func (k *kind) Configure(_ context.Context, raw json.RawMessage) error {
	cfg, err := parseConfig(raw)
	if err != nil {
		return err
	}
	st := k.newState(cfg)
	k.mu.Lock()
	old := k.st
	k.st = st
	k.mu.Unlock()
	if old != nil {
		old.transport.CloseIdleConnections()
	}
	return nil
}

func (k *kind) Check(_ context.Context, tool sdk.Tool) (json.RawMessage, error) {
	p, err := compile(tool, k.state().cfg)
	if err != nil {
		return nil, err
	}
	return json.Marshal(p.run)
}

// state returns the current settings and client, making the default ones
// if Configure has not been called.
func (k *kind) state() *state {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.st == nil {
		k.st = k.newState(defaultConfig())
	}
	return k.st
}

// newState makes a client that dials only what cfg allows.
func (k *kind) newState(cfg config) *state {
	g := &guard{allowPrivate: cfg.AllowPrivate, classify: newRanges().classify, exempt: k.exempt}
	dialer := &net.Dialer{
		Timeout:   time.Duration(cfg.TimeoutSeconds) * time.Second,
		KeepAlive: 30 * time.Second,
		Control:   g.control,
	}
	transport := &http.Transport{
		Proxy:                 nil, // never a proxy from the environment
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	if k.roots != nil {
		transport.TLSClientConfig = &tls.Config{RootCAs: k.roots, MinVersion: tls.VersionTLS12}
	}
	return &state{cfg: cfg, guard: g, transport: transport, places: make(chan struct{}, cfg.MaxRunning), waiting: &atomic.Int64{}}
}

// runSchema is the JSON Schema of the run table.
const runSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "http run table",
  "description": "One web request built from the tool's parameters. Templates take {{param}} placeholders: URL-escaped in the URL, JSON-escaped in a JSON body, as they are in headers and other bodies.",
  "type": "object",
  "required": ["type", "url"],
  "additionalProperties": false,
  "properties": {
    "type": {"const": "http"},
    "method": {
      "description": "The request method (any case; normalised to upper case).",
      "type": "string",
      "enum": ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"],
      "default": "GET"
    },
    "url": {
      "description": "The URL template. It starts with http:// or https://, or with a placeholder that takes a whole URL. Placeholders in the path are path-escaped, in the query query-escaped, in the host limited to letters, digits, dots and hyphens.",
      "type": "string",
      "pattern": "^(https?://|\\{\\{)"
    },
    "headers": {
      "description": "Request headers, each value a template. Host, Content-Length, Connection and other hop-by-hop headers can't be set.",
      "type": "object",
      "additionalProperties": {"type": "string"}
    },
    "body": {
      "description": "The request body template. With a JSON Content-Type, or no Content-Type and a body that is JSON, values are JSON-escaped (a placeholder outside a string takes the argument's JSON, null when missing) and Content-Type defaults to application/json; with application/x-www-form-urlencoded they are form-escaped; otherwise they go in as they are.",
      "type": "string"
    },
    "pick": {
      "description": "A dotted path of one field of a JSON response to return instead of the whole response, e.g. data.items.0.name (a number indexes a list).",
      "type": "string",
      "pattern": "^[^.]+(\\.[^.]+)*$"
    },
    "timeout_seconds": {
      "description": "The time the request may take, at most [http] timeout_seconds of the host (the default).",
      "type": "integer",
      "minimum": 1,
      "maximum": 600
    },
    "redirect_hosts": {
      "description": "Hosts a redirect may carry the tool's headers and body to, besides the host of its URL: a host name or address, with :port when it is not the scheme's (e.g. \"api2.example.com\", \"api2.example.com:8443\", \"[2001:db8::1]\"). A redirect to any other host (another scheme, host or port) is followed without the tool's headers, and one that would carry the body (307, 308) is refused; a redirect from https to plain http never carries them.",
      "type": "array",
      "items": {"type": "string", "pattern": "^[^/?#@*\\\\]+$"},
      "uniqueItems": true
    }
  }
}`
