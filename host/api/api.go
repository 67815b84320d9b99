// Package api serves the host's HTTP API: health, metrics, the tool list
// as function specs, checking a tool, reading, writing and deleting a
// tool's file (admins), calling a tool over plain HTTP,
// reading a run back, conversation sandboxes (sessions, their files and
// the ledger of their runs), the websocket protocol (docs/protocol.md), MCP
// at /mcp (package mcp), and the web UI's files; it lets in only callers with a good token, and when the
// tokens change it closes the websockets whose token no longer holds.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/auth"
	"github.com/toolhost/toolhost/host/cluster"
	"github.com/toolhost/toolhost/host/mcp"
	"github.com/toolhost/toolhost/host/runs"
	"github.com/toolhost/toolhost/host/sessions"
	"github.com/toolhost/toolhost/host/tools"
	"github.com/toolhost/toolhost/sdk/errcode"
)

// ProtocolVersion is the version of the websocket protocol in
// docs/protocol.md; clients read it from the hello reply.
const ProtocolVersion = wire.ProtocolVersion

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
	// Reloads says how many config reloads the host applied and refused,
	// for /healthz (`toolhost reload` waits on them); nil leaves them out.
	Reloads func() (applied, refused uint64)
	// Store says whether the host's store answers (sessions.Store.Ping),
	// for /healthz: nil when it does, or why not; a nil Store leaves it out.
	Store func(ctx context.Context) error
	// Tokens are the tokens callers may present; with none, only callers
	// on this machine are served, each as admin. SetTokens changes them.
	Tokens *auth.Tokens
	// ConnBuffer bounds the bytes of frames waiting for one websocket
	// client; 0 means DefaultConnBuffer.
	ConnBuffer int
	// UI serves the web UI at /; nil serves none.
	UI http.Handler
	// Metrics serves GET /metrics, behind the same checks as every
	// endpoint (a token of any role); nil serves none.
	Metrics http.Handler
	// ToolFiles are the tool files that GET, PUT and DELETE
	// /api/v1/tools/{name} read and write; nil writes none.
	ToolFiles ToolFiles
	// Sessions are the conversation sandboxes of /api/v1/sessions and
	// /api/v1/runs (sessions.go); nil serves none.
	Sessions *sessions.Service
	// Kinds says what each kind said of itself in Describe: whose tools
	// only admins may write (sdk.Info.AdminWritesOnly), whose run tables
	// every role may read (OpenRunTable). nil knows no kind: only admins
	// write any tool, and read any run table.
	Kinds runs.KindInfo
}

// Server is the HTTP handler of the API.
type Server struct {
	opts      Options
	mux       *http.ServeMux
	writePool *sync.Pool
	tokens    atomic.Pointer[auth.Tokens]

	// connsMu orders sign-ins and SetTokens: a connection signs in
	// either before a change of tokens, and is checked again by it, or
	// after, under the new tokens.
	connsMu sync.Mutex
	// conns are the open websockets and the HTTP calls waiting for their
	// run: what a change of tokens checks again.
	conns map[signedIn]struct{}
	// stopping, once set (CloseWebsockets), is why a websocket opened
	// from now on is closed at once.
	stopping *wire.Error

	// waits are the websocket's waits that tests shorten (wsconn.go); zero
	// means the default.
	waits wsWaits

	// pace paces each token's refusals (pace.go).
	pace refusalPace

	// draining, once set (Drain), makes /healthz answer 503 "draining"
	// while every other endpoint serves on.
	draining atomic.Bool

	// cluster checks the requests of the other hosts sharing the store
	// (internal.go), and router says which holds a conversation; nil
	// takes none, and forwards none.
	cluster atomic.Pointer[cluster.Signer]
	router  atomic.Pointer[cluster.Router]
}

// SetCluster makes the server take the requests of the other hosts
// sharing its store that signer finds signed with their shared secret,
// and forward a conversation's requests to the host router says holds it.
func (s *Server) SetCluster(signer *cluster.Signer, router *cluster.Router) {
	s.cluster.Store(signer)
	s.router.Store(router)
}

// signedIn is a caller that stays signed in for a while: a websocket, or
// an HTTP call waiting for its run.
type signedIn interface {
	// recheck checks the sign-in against tokens put in force. Called
	// with connsMu held.
	recheck(tokens *auth.Tokens)
}

// track adds a caller to those a change of tokens checks again, and checks
// it against the tokens in force now (they may have changed since it
// signed in); the returned func removes it.
func (s *Server) track(c signedIn) (untrack func()) {
	s.connsMu.Lock()
	s.conns[c] = struct{}{}
	c.recheck(s.tokens.Load())
	if ws, ok := c.(*wsConn); ok && s.stopping != nil {
		ws.closeWith(*s.stopping)
	}
	s.connsMu.Unlock()
	return func() {
		s.connsMu.Lock()
		delete(s.conns, c)
		s.connsMu.Unlock()
	}
}

// httpWait is an HTTP call waiting for its run's end: a change of tokens
// that takes its caller's sign-in away ends the wait.
type httpWait struct {
	mu     sync.Mutex
	id     auth.Identity
	change *auth.Change
	cancel context.CancelFunc
}

func (w *httpWait) recheck(tokens *auth.Tokens) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.change != nil {
		return
	}
	id, change := tokens.Recheck(w.id)
	if change == nil {
		w.id = id
		return
	}
	w.change = change
	w.cancel()
}

func (w *httpWait) revoked() *auth.Change {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.change
}

// New returns the API's handler.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.Tokens == nil {
		opts.Tokens = auth.New(nil)
	}
	if opts.ConnBuffer <= 0 {
		opts.ConnBuffer = DefaultConnBuffer
	}
	s := &Server{opts: opts, mux: http.NewServeMux(), writePool: &sync.Pool{}, conns: map[signedIn]struct{}{}}
	s.tokens.Store(opts.Tokens)
	s.mux.HandleFunc("GET /healthz", s.health)
	if opts.Metrics != nil {
		s.mux.HandleFunc("GET /metrics", s.authed(func(w http.ResponseWriter, r *http.Request, _ auth.Identity) {
			opts.Metrics.ServeHTTP(w, r)
		}))
	}
	s.mux.HandleFunc("GET /api/v1/tools", s.authed(s.listTools))
	s.mux.HandleFunc("POST /api/v1/tools/check", s.authed(s.checkTool))
	s.mux.HandleFunc("GET /api/v1/tools/{name}", s.authed(s.getTool))
	s.mux.HandleFunc("PUT /api/v1/tools/{name}", s.authed(s.putTool))
	s.mux.HandleFunc("DELETE /api/v1/tools/{name}", s.authed(s.deleteTool))
	s.mux.HandleFunc("POST /api/v1/tools/{name}/call", s.authed(s.callTool))
	s.mux.HandleFunc("GET /api/v1/runs/{id}", s.authed(s.getRun))
	s.mux.HandleFunc("GET /api/v1/me", s.authed(s.me))
	s.mux.HandleFunc("GET /api/v1/ws", s.websocket)
	s.approvalRoutes()
	// MCP (host/mcp): the same tools, tokens and roles, for MCP clients.
	mcpHandler := mcp.New(mcp.Options{Dispatcher: opts.Dispatcher, Tools: s.visibleSpecs, Shown: s.shown, NeedsSession: s.needsSession, Version: opts.Version, Logger: opts.Logger.Named("mcp")})
	// What OAuth clients read to learn that the host takes bearer tokens only.
	s.mux.HandleFunc(mcp.WellKnownPrefix, mcp.WellKnown)
	s.mux.HandleFunc(mcp.Path, s.authed(func(w http.ResponseWriter, r *http.Request, id auth.Identity) {
		// A change of tokens that takes the caller's sign-in away ends its call, as over HTTP.
		ctx, cancel := context.WithCancelCause(r.Context())
		defer cancel(nil)
		defer s.track(&httpWait{id: id, cancel: func() { cancel(mcp.SignedOut{Message: "the token of this call was taken away or lowered"}) }})()
		mcpHandler.Serve(w, r.WithContext(ctx), id)
	}))
	s.sessionRoutes()
	s.internalRoutes()
	s.mux.HandleFunc("/api/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, wire.CodeNotFound, "there is no such endpoint (see docs/protocol.md)")
	})
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if opts.UI == nil || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
			writeError(w, http.StatusNotFound, wire.CodeNotFound, "there is nothing here (the API is under /api/v1/)")
			return
		}
		opts.UI.ServeHTTP(w, r)
	})
	return s
}

// ServeHTTP serves every caller when tokens are configured (each endpoint
// checks the token), and only callers on this machine when none are. It
// refuses what a web page of another site makes a browser send: requests
// with a foreign Origin, and, with no tokens, requests for a host name
// that is not this machine's (DNS rebinding). An address with '.', '..'
// or empty parts is refused, never cleaned or redirected.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.tokens.Load().Required() && (!fromLoopback(r) || !localName(r.Host)) {
		writeError(w, http.StatusForbidden, wire.CodeForbidden, "this host serves callers on its own machine only, at localhost or a loopback address (no tokens are configured)")
		return
	}
	if r.Header.Get("Origin") != "" && !s.checkOrigin(r) {
		writeError(w, http.StatusForbidden, wire.CodeForbidden, "requests from the web pages of other sites are refused ([server] allowed_origins lists the sites allowed)")
		return
	}
	// The router would clean such an address and redirect to another
	// endpoint: refused as sent instead (address.go).
	if refuseAddress(w, r) {
		return
	}
	s.mux.ServeHTTP(w, r)
}

// localName says whether a Host header names this machine: localhost or a
// loopback address.
func localName(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// authed lets a handler run only for a caller with a good token, and tells
// it who the caller is.
func (s *Server) authed(h func(http.ResponseWriter, *http.Request, auth.Identity)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tokens := s.tokens.Load()
		id := auth.Local()
		if tokens.Required() {
			tok, _ := auth.Bearer(r)
			var ok bool
			if id, ok = tokens.Check(tok); !ok {
				s.unauthorized(w, r)
				return
			}
		}
		h(&pacedWriter{ResponseWriter: w, pace: func() { s.pace.wait(r.Context(), id.Name) }}, r, id)
	}
}

// SetTokens puts a new set of tokens in force, from the next request on.
// Each open websocket is checked again: one signed in with a token that
// is gone, renamed or lowered in role (or as the local caller of a host
// that now needs tokens) gets a closing frame saying why and is closed;
// its runs go on. One whose role was raised gets the new role at once.
func (s *Server) SetTokens(t *auth.Tokens) {
	if t == nil {
		t = auth.New(nil)
	}
	s.connsMu.Lock()
	defer s.connsMu.Unlock()
	s.tokens.Store(t)
	for c := range s.conns {
		c.recheck(t)
	}
}

func (s *Server) unauthorized(w http.ResponseWriter, r *http.Request) {
	s.opts.Logger.Warn("refused a request without a good token", "peer", r.RemoteAddr, "path", r.URL.Path)
	_, sent := auth.Bearer(r)
	w.Header().Set("WWW-Authenticate", mcp.Challenge(r, sent))
	writeError(w, http.StatusUnauthorized, wire.CodeUnauthorized, "a good token is needed: send Authorization: Bearer <token>")
}

func forbidden(w http.ResponseWriter, message string) {
	writeError(w, http.StatusForbidden, wire.CodeForbidden, message)
}

func fromLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Drain makes /healthz answer 503 with "status": "draining" from now on,
// so that a load balancer's health check takes the host out of its pool,
// while every other endpoint serves on: the host is about to stop (see
// host.Host.Drain). There is no way back: a drained host stops.
func (s *Server) Drain() { s.draining.Store(true) }

// health answers /healthz: 200 while the host serves; 503 while it drains
// before stopping ("status": "draining"), or while its store can't be
// reached (with Retry-After), so that a load balancer sends calls to
// another host meanwhile. The rest of the answer (the reload counts that
// `toolhost reload` and the systemd watchdog read) is there either way.
// The store's error is told to callers on this machine only: it names the
// database's address.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	body := map[string]any{"status": "ok", "version": s.opts.Version, "tools": len(s.opts.Registry.List())}
	if s.opts.Reloads != nil {
		body["reloads"], body["reloads_refused"] = s.opts.Reloads()
	}
	status := http.StatusOK
	if s.opts.Store != nil {
		ctx, cancel := context.WithTimeout(r.Context(), healthStoreTimeout)
		err := s.opts.Store(ctx)
		cancel()
		body["store"] = "ok"
		if err != nil {
			status = http.StatusServiceUnavailable
			w.Header().Set("Retry-After", strconv.Itoa(StoreRetrySeconds))
			body["status"], body["store"] = "store_unavailable", "unavailable"
			switch {
			case fromLoopback(r):
				body["store_error"] = err.Error()
			case errors.Is(err, sessions.ErrUnavailable):
				body["store_error"] = wireError(err).Message
			default:
				body["store_error"] = "the store fails; the host's log says why"
			}
		}
	}
	if s.draining.Load() {
		status, body["status"] = http.StatusServiceUnavailable, "draining"
	}
	writeJSON(w, status, body)
}

// healthStoreTimeout bounds how long /healthz waits for the store's
// answer: a database that does not answer by then counts as unavailable.
const healthStoreTimeout = 2 * time.Second

func (s *Server) listTools(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	s.writeToolList(w, r, id)
}

// checkTool takes a tool in TOML (or JSON) and returns it normalised or
// the errors; nothing is saved.
func (s *Server) checkTool(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	if !id.CanCall() {
		forbidden(w, fmt.Sprintf("%s is a %s and may not check tools", id.Name, id.Role))
		return
	}
	src, def, err := parseTool(r, "")
	if err != nil {
		writeRefusal(w, src, err)
		return
	}
	// A check may start a sandbox (the python kind's does): it is metered
	// like a run, against the caller's max_running and budgets.
	end, err := s.opts.Dispatcher.StartCheck(id.Name, def)
	if err != nil {
		var ce *errcode.Error
		if errors.As(err, &ce) {
			writeError(w, callErrorStatus(ce.Code), ce.Code, ce.Message)
			return
		}
		writeError(w, http.StatusInternalServerError, wire.CodeFailed, err.Error())
		return
	}
	t, err := s.opts.Check(r.Context(), def)
	end()
	if err != nil {
		writeRefusal(w, src, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "tool": toolJSON(t), "spec": t.Spec()})
}

// callTool runs a tool and answers when it ends: for curl users.
func (s *Server) callTool(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	if !id.CanCall() {
		forbidden(w, fmt.Sprintf("%s is a %s and may not run tools", id.Name, id.Role))
		return
	}
	args, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(args) > maxBody {
		writeError(w, http.StatusRequestEntityTooLarge, wire.CodeTooLarge, "the arguments must be at most 1 MiB of JSON")
		return
	}
	session := r.URL.Query().Get("session")
	if session == "" {
		session = r.Header.Get("Toolhost-Session")
	}
	run, err := s.opts.Dispatcher.Start(runs.Request{
		Tool: r.PathValue("name"), Args: args, Principal: id.Name,
		Session: session, IdempotencyKey: r.Header.Get("Idempotency-Key"),
	})
	if err != nil {
		var ce *errcode.Error
		if errors.As(err, &ce) {
			writeError(w, callErrorStatus(ce.Code), ce.Code, ce.Message)
			return
		}
		writeError(w, http.StatusInternalServerError, wire.CodeFailed, err.Error())
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	wait := &httpWait{id: id, cancel: cancel}
	untrack := s.track(wait)
	last, asked, err := waitOrAsked(ctx, run)
	untrack()
	if asked != nil {
		// The run waits for a person: answer at once (approvals.go).
		writeJSON(w, http.StatusAccepted, askedJSON(run, asked))
		return
	}
	if err != nil {
		if change := wait.revoked(); change != nil {
			// The caller's token was taken away: the run goes on, for an
			// admin to read, but this caller gets nothing more of it.
			status := http.StatusUnauthorized
			if change.Code == wire.CodeTokenDowngraded {
				status = http.StatusForbidden
			}
			writeError(w, status, change.Code, change.Message)
			return
		}
		// The caller went away: nobody is left to read the run, unless
		// it has an idempotency key, which a retry attaches to.
		if run.IdempotencyKey == "" {
			run.Cancel()
		}
		return
	}
	stdout, stderr, err := run.Printed()
	if err != nil {
		s.opts.Logger.Error("a run's output could not be read back", "run", run.ID, "error", err)
	}
	body := wire.CallResult{Run: run.ID, Printed: strings.TrimSpace(stdout), Stderr: stderr}
	if last.Error != nil {
		body.Error = last.Error
		writeJSON(w, http.StatusUnprocessableEntity, body)
		return
	}
	body.Result, body.Content = last.Result, last.Content
	writeJSON(w, http.StatusOK, body)
}

func callErrorStatus(code string) int {
	switch code {
	case wire.CodeUnknownTool:
		return http.StatusNotFound
	case wire.CodePluginUnavailable, wire.CodeStoreUnavailable, wire.CodeSessionUnavailable:
		return http.StatusServiceUnavailable
	case wire.CodeTooManyRuns, wire.CodeBudget, wire.CodeTooManySessions:
		return http.StatusTooManyRequests
	case wire.CodeIdempotencyConflict, wire.CodeInterrupted, wire.CodeInProgress:
		return http.StatusConflict
	case wire.CodeForbidden:
		return http.StatusForbidden
	}
	return http.StatusBadRequest
}

// getRun gives a run's record and output.
func (s *Server) getRun(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	run, ok := s.opts.Dispatcher.Find(r.Context(), r.PathValue("id"))
	if !ok {
		writeError(w, http.StatusNotFound, wire.CodeUnknownRun, "there is no run with that id (runs are kept for a while after they end)")
		return
	}
	if !id.CanSee(run.Principal) {
		forbidden(w, "that run was started by someone else")
		return
	}
	rec, err := run.Record(r.URL.Query().Get("events") != "false")
	if err != nil {
		s.opts.Logger.Error("a run's output could not be read back", "run", run.ID, "error", err)
		writeError(w, http.StatusInternalServerError, wire.CodeFailed, "the run's output can't be read back: "+err.Error())
		return
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

// writeError answers an error. store_unavailable is 503 with Retry-After
// whatever the endpoint: the store's database is down, which a retry in a
// few seconds may outlive.
func writeError(w http.ResponseWriter, status int, code, message string) {
	if code == wire.CodeStoreUnavailable {
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", strconv.Itoa(StoreRetrySeconds))
	}
	writeJSON(w, status, map[string]any{"error": wire.Error{Code: code, Message: message}})
}

// StoreRetrySeconds is the Retry-After of a store_unavailable answer, and
// of /healthz while the store is unavailable.
const StoreRetrySeconds = 5

// wireError is the protocol's error for err: the first *wire.Error in its
// chain, or failed with err's text. A store whose database can't be
// reached is one (sessions.ErrUnavailable, store_unavailable): its
// message, not the database's address, is what the caller reads.
func wireError(err error) *wire.Error {
	var ce *wire.Error
	if errors.As(err, &ce) && ce.Code != "" {
		return ce
	}
	return &wire.Error{Code: wire.CodeFailed, Message: err.Error()}
}

// needsSession says whether a tool runs in a conversation's sandbox, for
// MCP's hint to a call that names no session.
func (s *Server) needsSession(tool string) bool {
	t, ok := s.opts.Registry.Get(tool)
	if !ok {
		return false
	}
	return s.inSession(t)
}

// inSession says whether a tool runs in a conversation's sandbox.
func (s *Server) inSession(t *tools.Tool) bool {
	kind, _ := s.kindInfo(t.Kind)
	_, ok := sessions.Language(kind, t.Run)
	return ok
}

// shown says whether a caller is shown a tool, as visibleSpecs does,
// without building every spec.
func (s *Server) shown(id auth.Identity, tool string) bool {
	t, ok := s.opts.Registry.Get(tool)
	if !ok {
		return false
	}
	return !s.inSession(t) || s.showsSessions(id)
}
