// Package api serves the host's HTTP API: health, the tool list as
// function specs, checking a tool, calling a tool over plain HTTP, reading
// a run back, and the websocket protocol (docs/protocol.md).
package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/runs"
	"github.com/toolhost/toolhost/host/tools"
)

// ProtocolVersion is the version of the websocket protocol in
// docs/protocol.md; clients read it from the hello reply.
const ProtocolVersion = 1

// maxBody bounds request bodies (a tool in TOML, a call's arguments).
const maxBody = 1 << 20

// Checker checks a tool definition against its kind's plugin.
type Checker func(ctx context.Context, def config.Tool) (*tools.Tool, error)

// Options wire the API to the rest of the host.
type Options struct {
	Registry   *tools.Registry
	Dispatcher *runs.Dispatcher
	Check      Checker
	Logger     hclog.Logger
	// AllowedOrigins lists the browser origins allowed to open the
	// websocket besides the host's own.
	AllowedOrigins []string
	// Version is the host's version, for /healthz.
	Version string
}

// Server is the HTTP handler of the API.
type Server struct {
	opts Options
	mux  *http.ServeMux
}

// New returns the API's handler.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	s := &Server{opts: opts, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /healthz", s.health)
	s.mux.HandleFunc("GET /api/v1/tools", s.listTools)
	s.mux.HandleFunc("POST /api/v1/tools/check", s.checkTool)
	s.mux.HandleFunc("POST /api/v1/tools/{name}/call", s.callTool)
	s.mux.HandleFunc("GET /api/v1/runs/{id}", s.getRun)
	s.mux.HandleFunc("GET /api/v1/ws", s.websocket)
	return s
}

// ServeHTTP serves loopback callers only: until tokens exist, nobody else
// may call tools.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !fromLoopback(r) {
		writeError(w, http.StatusForbidden, "forbidden", "this host serves callers on its own machine only (no tokens are configured)")
		return
	}
	s.mux.ServeHTTP(w, r)
}

func fromLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "version": s.opts.Version, "tools": len(s.opts.Registry.List())})
}

func (s *Server) specs() []tools.FunctionSpec {
	list := s.opts.Registry.List()
	out := make([]tools.FunctionSpec, len(list))
	for i, t := range list {
		out[i] = t.Spec()
	}
	return out
}

func (s *Server) listTools(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"tools": s.specs()})
}

// checkTool takes a tool in TOML and returns it normalised or the errors;
// nothing is saved.
func (s *Server) checkTool(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(data) > maxBody {
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", "a tool must be at most 1 MiB of TOML")
		return
	}
	def, err := config.ParseTool("request", data)
	if err == nil {
		var t *tools.Tool
		if t, err = s.opts.Check(r.Context(), def); err == nil {
			var run any
			_ = json.Unmarshal(t.Run, &run)
			writeJSON(w, http.StatusOK, map[string]any{"ok": true, "tool": map[string]any{
				"name": t.Name, "description": t.Description, "effect": t.Effect, "params": t.Params, "run": run,
			}, "spec": t.Spec()})
			return
		}
	}
	var ce config.Errors
	if !errors.As(err, &ce) {
		ce = config.Errors{{File: "request", Message: err.Error()}}
	}
	list := make([]map[string]any, len(ce))
	for i, e := range ce {
		list[i] = map[string]any{"line": e.Line, "field": e.Field, "message": e.Message, "text": e.Error()}
	}
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"ok": false, "errors": list})
}

// callTool runs a tool and answers when it ends: for curl users.
func (s *Server) callTool(w http.ResponseWriter, r *http.Request) {
	args, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(args) > maxBody {
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", "the arguments must be at most 1 MiB of JSON")
		return
	}
	run, err := s.opts.Dispatcher.Start(runs.Request{Tool: r.PathValue("name"), Args: args, Principal: "local"})
	if err != nil {
		var ce *runs.CallError
		if errors.As(err, &ce) {
			writeError(w, callErrorStatus(ce.Code), ce.Code, ce.Message)
			return
		}
		writeError(w, http.StatusInternalServerError, "failed", err.Error())
		return
	}
	last, err := run.Wait(r.Context())
	if err != nil {
		// The caller went away: nobody is left to read the run.
		run.Cancel()
		return
	}
	stdout, stderr := run.Printed()
	body := map[string]any{"run": run.ID, "printed": strings.TrimSpace(stdout)}
	if stderr != "" {
		body["stderr"] = stderr
	}
	if last.Error != nil {
		body["error"] = last.Error
		writeJSON(w, http.StatusUnprocessableEntity, body)
		return
	}
	body["result"] = last.Result
	writeJSON(w, http.StatusOK, body)
}

func callErrorStatus(code string) int {
	switch code {
	case "unknown_tool":
		return http.StatusNotFound
	case "plugin_unavailable":
		return http.StatusServiceUnavailable
	}
	return http.StatusBadRequest
}

// getRun gives a run's record and output.
func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	run, ok := s.opts.Dispatcher.Get(r.PathValue("id"))
	if !ok {
		writeError(w, http.StatusNotFound, "unknown_run", "there is no run with that id (runs are kept for a while after they end)")
		return
	}
	stdout, stderr := run.Printed()
	rec := map[string]any{
		"run": run.ID, "tool": run.Tool, "principal": run.Principal, "started": run.Started.UTC().Format(time.RFC3339Nano),
		"done": run.Done(), "stdout": stdout, "stderr": stderr, "events": run.Events(0),
	}
	if e := run.Ended(); !e.IsZero() {
		rec["ended"] = e.UTC().Format(time.RFC3339Nano)
		last, _ := run.Wait(r.Context())
		if last.Error != nil {
			rec["error"] = last.Error
		} else {
			rec["result"] = last.Result
		}
	}
	writeJSON(w, http.StatusOK, rec)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, map[string]any{"error": runs.ErrorBody{Code: code, Message: message}})
}
