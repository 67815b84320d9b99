//lint:file-ignore SA1019 MCP's logging is deprecated from protocol 2026-07-28 on (SEP-2577, for a year at least); the versions MCP clients speak today have it, and the host serves them.

package mcp

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/client/wire"
)

// MetaLogLevel is the least severe level of log notifications a call
// wants, in its _meta (protocol 2026-07-28's per-request level; taken on
// every version).
const MetaLogLevel = sdkmcp.MetaKeyLogLevel

// DefaultLogLevel is the level of a call whose caller set none.
const DefaultLogLevel sdkmcp.LoggingLevel = "info"

// capabilities are what the host serves: tools, and logging.
func capabilities() *sdkmcp.ServerCapabilities {
	return &sdkmcp.ServerCapabilities{Tools: &sdkmcp.ToolCapabilities{}, Logging: &sdkmcp.LoggingCapabilities{}}
}

// setLevel keeps the level of a logging/setLevel request for its caller.
func (h *Handler) setLevel(principal string, req sdkmcp.Request) error {
	r, ok := req.(*sdkmcp.ServerRequest[*sdkmcp.SetLoggingLevelParams])
	if !ok || r.Params == nil || severity(r.Params.Level) < 0 {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown logging level (the levels are %s)", levelList())}
	}
	h.levels.set(principal, r.Params.Level)
	return nil
}

func levelList() string {
	s := make([]string, len(levels))
	for i, l := range levels {
		s[i] = string(l)
	}
	return strings.Join(s, ", ")
}

// logLevels are the levels callers last set with logging/setLevel, by
// caller: a stateless server has no session to keep one in, so a level
// holds for the caller's later calls served by this host (each replica
// keeps its own), until the caller sets another.
type logLevels struct {
	mu     sync.Mutex
	levels map[string]sdkmcp.LoggingLevel
}

func (l *logLevels) set(principal string, level sdkmcp.LoggingLevel) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.levels == nil {
		l.levels = map[string]sdkmcp.LoggingLevel{}
	}
	l.levels[principal] = level
}

func (l *logLevels) get(principal string) (sdkmcp.LoggingLevel, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	level, ok := l.levels[principal]
	return level, ok
}

// levels are MCP's logging levels, least severe first (RFC 5424's).
var levels = []sdkmcp.LoggingLevel{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// severity is a level's place in levels, or -1 for an unknown level.
func severity(l sdkmcp.LoggingLevel) int {
	for i, x := range levels {
		if x == l {
			return i
		}
	}
	return -1
}

// logLevel is the least severe level of log notifications a call of
// principal gets: its own _meta's, else the caller's last
// logging/setLevel, else DefaultLogLevel.
func (h *Handler) logLevel(principal string, meta sdkmcp.Meta) sdkmcp.LoggingLevel {
	if v, ok := meta[MetaLogLevel].(string); ok && severity(sdkmcp.LoggingLevel(v)) >= 0 {
		return sdkmcp.LoggingLevel(v)
	}
	if l, ok := h.levels.get(principal); ok {
		return l
	}
	return DefaultLogLevel
}

// progressText is a progress event as a progress notification's message:
// its fraction as a percentage, then its message.
func progressText(e wire.Event) string {
	if e.Fraction == nil || *e.Fraction < 0 {
		return e.Message // a negative fraction is unknown
	}
	pct := fmt.Sprintf("%.0f%%", *e.Fraction*100)
	if e.Message == "" {
		return pct
	}
	return pct + " " + e.Message
}

// notifier sends a call's notifications on its response stream.
type notifier struct {
	h     *Handler
	ctx   context.Context
	req   *sdkmcp.CallToolRequest
	run   string
	tool  string
	token any
	step  float64
	level sdkmcp.LoggingLevel
	next  sdkmcp.MethodHandler
	// logsOn says the SDK's session was told to pass log notifications.
	logsOn bool
}

// progress sends message as the next progress notification, when the
// client asked for progress. progress counts 1, 2, 3 …, strictly
// increasing as MCP requires; there is no total.
func (n *notifier) progress(message string) {
	if n.token == nil || message == "" {
		return
	}
	n.step++
	err := n.req.Session.NotifyProgress(n.ctx, &sdkmcp.ProgressNotificationParams{ProgressToken: n.token, Progress: n.step, Message: message})
	if err != nil && n.ctx.Err() == nil {
		n.h.opts.Logger.Debug("a progress notification could not be sent", "run", n.run, "error", err)
	}
}

// log sends a log event as a log notification, when its level is at
// least the call's. The logger is the tool's name.
func (n *notifier) log(e wire.Event) {
	level := logLevelOf(e.Level)
	if severity(level) < severity(n.level) {
		return
	}
	if !n.logsOn {
		// The SDK passes log notifications at its session's level, which a
		// stateless session never has; this filters, so it passes all.
		// (On protocol 2026-07-28 the request's own _meta level rules.)
		n.logsOn = true
		_, err := n.next(n.ctx, "logging/setLevel", &sdkmcp.ServerRequest[*sdkmcp.SetLoggingLevelParams]{
			Session: n.req.Session, Params: &sdkmcp.SetLoggingLevelParams{Level: levels[0]}})
		if err != nil {
			n.h.opts.Logger.Debug("log notifications could not be turned on", "run", n.run, "error", err)
		}
	}
	err := n.req.Session.Log(n.ctx, &sdkmcp.LoggingMessageParams{Level: level, Logger: n.tool, Data: e.Message})
	if err != nil && n.ctx.Err() == nil {
		n.h.opts.Logger.Debug("a log notification could not be sent", "run", n.run, "error", err)
	}
}

// logLevelOf is a run's log level as MCP's: MCP's own levels as they are,
// the plugin SDK's trace and warn as debug and warning, anything else info.
func logLevelOf(l string) sdkmcp.LoggingLevel {
	switch l {
	case "trace":
		return "debug"
	case "warn":
		return "warning"
	}
	if severity(sdkmcp.LoggingLevel(l)) < 0 {
		return "info"
	}
	return sdkmcp.LoggingLevel(l)
}
