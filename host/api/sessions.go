package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"time"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/host/auth"
	"github.com/toolhost/toolhost/host/sessions"
	"github.com/toolhost/toolhost/host/tools"
	"github.com/toolhost/toolhost/sdk/errcode"
)

// MaxFileBytes bounds a file sent to or read from a session.
const MaxFileBytes = 64 << 20

// sessionRoutes adds the endpoints of conversation sandboxes
// (docs/protocol.md, "Sessions").
func (s *Server) sessionRoutes() {
	s.mux.HandleFunc("GET /api/v1/sessions", s.authed(s.sessionsFor(s.listSessions)))
	s.mux.HandleFunc("GET /api/v1/sessions/{id}", s.authed(s.sessionsFor(s.atItsHost(s.ofSession(s.getSession)))))
	s.mux.HandleFunc("PATCH /api/v1/sessions/{id}", s.authed(s.sessionsFor(s.atItsHost(s.ofSession(s.patchSession)))))
	s.mux.HandleFunc("DELETE /api/v1/sessions/{id}", s.authed(s.sessionsFor(s.atItsHost(s.ofSession(s.deleteSession)))))
	s.mux.HandleFunc("POST /api/v1/sessions/{id}/stop", s.authed(s.sessionsFor(s.atItsHost(s.ofSession(s.stopSession)))))
	s.mux.HandleFunc("GET /api/v1/sessions/{id}/files", s.authed(s.sessionsFor(s.atItsHost(s.ofSession(s.listFiles)))))
	s.mux.HandleFunc("GET /api/v1/sessions/{id}/files/{path...}", s.authed(s.sessionsFor(s.atItsHost(s.ofTransfer(s.readFile)))))
	s.mux.HandleFunc("PUT /api/v1/sessions/{id}/files/{path...}", s.authed(s.sessionsFor(s.atItsHost(s.ofTransfer(s.writeFile)))))
	s.mux.HandleFunc("DELETE /api/v1/sessions/{id}/files/{path...}", s.authed(s.sessionsFor(s.atItsHost(s.ofFile(s.removeFile)))))
	// With no path, PUT and DELETE name no file. Without these the router
	// would redirect them to …/files/ (never: see address.go).
	noFile := s.authed(s.sessionsFor(s.ofSession(func(w http.ResponseWriter, _ *http.Request, _ *sessions.Service, _, _ string) {
		s.writeSessionError(w, sessions.CheckPath(""))
	})))
	s.mux.HandleFunc("PUT /api/v1/sessions/{id}/files", noFile)
	s.mux.HandleFunc("DELETE /api/v1/sessions/{id}/files", noFile)
	s.mux.HandleFunc("GET /api/v1/runs", s.authed(s.sessionsFor(s.listRuns)))
}

// sessionHandler is an endpoint of sessions, given the service.
type sessionHandler func(w http.ResponseWriter, r *http.Request, id auth.Identity, svc *sessions.Service)

// sessionsFor lets a handler run only when sessions are served and the
// caller's role may use them ([sessions] who; viewers never).
func (s *Server) sessionsFor(h sessionHandler) func(http.ResponseWriter, *http.Request, auth.Identity) {
	return func(w http.ResponseWriter, r *http.Request, id auth.Identity) {
		svc := s.opts.Sessions
		if svc == nil {
			writeError(w, http.StatusNotImplemented, wire.CodeUnsupported, "this host serves no conversation sandboxes")
			return
		}
		if err := svc.Ready(); err != nil {
			s.writeSessionError(w, err)
			return
		}
		if !svc.MayUse(id.Role) {
			s.writeSessionError(w, svc.Forbidden(id.Name, id.Role))
			return
		}
		h(w, r, id, svc)
	}
}

// owner is the principal whose session the request names: the caller's
// own, or, for an admin, the one ?principal= names. For anyone else a
// ?principal= naming someone else names no session of theirs: ok is false
// and the answer is the same not_found as for a session that is not there.
func owner(r *http.Request, id auth.Identity) (principal string, ok bool) {
	p := r.URL.Query().Get("principal")
	switch {
	case p == "" || p == id.Name:
		return id.Name, true
	case id.Role == auth.Admin:
		return p, true
	}
	return "", false
}

// sessionRequest is an endpoint of one session, whose {id} is checked and
// whose owner is found (see ofSession).
type sessionRequest func(w http.ResponseWriter, r *http.Request, svc *sessions.Service, principal, session string)

// ofSession checks the {id} of the path (a bad one is answered with 400
// and the rule) and finds the session's owner (see owner: a session of
// someone the caller may not name is not_found) before h runs.
func (s *Server) ofSession(h sessionRequest) sessionHandler {
	return func(w http.ResponseWriter, r *http.Request, id auth.Identity, svc *sessions.Service) {
		session := r.PathValue("id")
		if err := sessions.CheckID(session); err != nil {
			s.writeSessionError(w, err)
			return
		}
		principal, ok := owner(r, id)
		if !ok {
			s.writeSessionError(w, sessions.NotFound(session))
			return
		}
		h(w, r, svc, principal, session)
	}
}

// fileRequest is an endpoint of one file of a session (see ofFile).
type fileRequest func(w http.ResponseWriter, r *http.Request, svc *sessions.Service, principal, session, path string)

// ofFile is ofSession that also checks the {path...} of the path: a bad
// one is answered with 400 and the rule.
func (s *Server) ofFile(h fileRequest) sessionHandler {
	return s.ofSession(func(w http.ResponseWriter, r *http.Request, svc *sessions.Service, principal, session string) {
		p := r.PathValue("path")
		if err := sessions.CheckPath(p); err != nil {
			s.writeSessionError(w, err)
			return
		}
		h(w, r, svc, principal, session, p)
	})
}

// ofTransfer is ofFile for an upload or download: once the id and path are
// checked, it takes one of the caller's places of a transfer (counted
// against the caller, whoever owns the session; see sessions.Transfer) and
// holds it until h has written its answer, so the file's bytes are held
// within the caps. Refused, it answers 429 too_many_transfers with
// Retry-After at once; nothing of the session is found, made or read.
func (s *Server) ofTransfer(h fileRequest) sessionHandler {
	return func(w http.ResponseWriter, r *http.Request, id auth.Identity, svc *sessions.Service) {
		s.ofFile(func(w http.ResponseWriter, r *http.Request, svc *sessions.Service, principal, session, p string) {
			done, err := svc.Transfer(id.Name)
			if err != nil {
				s.writeSessionError(w, err)
				return
			}
			defer done()
			h(w, r, svc, principal, session, p)
		})(w, r, id, svc)
	}
}

type sessionJSON struct {
	Session   string    `json:"session"`
	Principal string    `json:"principal"`
	Network   string    `json:"network"`
	Backend   string    `json:"backend"`
	Created   time.Time `json:"created"`
	LastUsed  time.Time `json:"last_used"`
	Expires   time.Time `json:"expires"`
}

func toSessionJSON(svc *sessions.Service, se sessions.Session) sessionJSON {
	return sessionJSON{Session: se.ID, Principal: se.Principal, Network: se.Network, Backend: se.Backend,
		Created: se.Created, LastUsed: se.LastUsed, Expires: svc.Expires(se).UTC()}
}

type fileJSON struct {
	Path     string    `json:"path"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
	Dir      bool      `json:"dir,omitempty"`
}

func toFileJSON(f sessions.File) fileJSON {
	return fileJSON{Path: f.Path, Size: f.Size, Modified: f.ModTime.UTC(), Dir: f.Dir}
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request, id auth.Identity, svc *sessions.Service) {
	principal, ok := owner(r, id)
	if !ok {
		writeJSON(w, http.StatusOK, map[string]any{"sessions": []sessionJSON{}})
		return
	}
	all := id.Role == auth.Admin && r.URL.Query().Get("principal") == ""
	list, err := svc.List(r.Context(), principal, all)
	if err != nil {
		s.writeSessionError(w, err)
		return
	}
	out := make([]sessionJSON, len(list))
	for i, se := range list {
		out[i] = toSessionJSON(svc, se)
	}
	writeJSON(w, http.StatusOK, map[string]any{"sessions": out})
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request, svc *sessions.Service, principal, session string) {
	se, err := svc.Get(r.Context(), principal, session)
	if err != nil {
		s.writeSessionError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toSessionJSON(svc, se))
}

func (s *Server) patchSession(w http.ResponseWriter, r *http.Request, svc *sessions.Service, principal, session string) {
	var body struct {
		Network *string `json:"network"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || body.Network == nil {
		writeError(w, http.StatusBadRequest, wire.CodeBadRequest, `the body must be a JSON object {"network": "off" | "web" | "packages"}`)
		return
	}
	se, err := svc.SetNetwork(r.Context(), principal, session, *body.Network)
	if err != nil {
		s.writeSessionError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toSessionJSON(svc, se))
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request, svc *sessions.Service, principal, session string) {
	if err := svc.Delete(r.Context(), principal, session); err != nil {
		s.writeSessionError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) stopSession(w http.ResponseWriter, r *http.Request, svc *sessions.Service, principal, session string) {
	if err := svc.Stop(r.Context(), principal, session); err != nil {
		s.writeSessionError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request, svc *sessions.Service, principal, session string) {
	files, err := svc.Files(r.Context(), principal, session)
	if err != nil {
		s.writeSessionError(w, err)
		return
	}
	out := make([]fileJSON, len(files))
	for i, f := range files {
		out[i] = toFileJSON(f)
	}
	writeJSON(w, http.StatusOK, map[string]any{"session": session, "files": out})
}

// readFile sends a file of a session as the plugin streams it: whatever
// its size, the host holds a chunk of it at a time.
func (s *Server) readFile(w http.ResponseWriter, r *http.Request, svc *sessions.Service, principal, session, p string) {
	f, size, err := svc.OpenFile(r.Context(), principal, session, p, MaxFileBytes)
	if err != nil {
		s.writeSessionError(w, err)
		return
	}
	defer f.Close()
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(p)}))
	h.Set("X-Content-Type-Options", "nosniff")
	if size >= 0 {
		h.Set("Content-Length", strconv.FormatInt(size, 10))
	}
	w.WriteHeader(http.StatusOK)
	src := &readErr{r: f}
	if _, err := io.CopyBuffer(writerOnly{w}, src, make([]byte, 32<<10)); err != nil && src.err != nil {
		// The file broke off after its header went: cut the response,
		// so that the caller doesn't take a part for the whole.
		panic(http.ErrAbortHandler)
	}
}

// readErr remembers the error of its reader other than io.EOF.
type readErr struct {
	r   io.Reader
	err error
}

func (e *readErr) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		e.err = err
	}
	return n, err
}

// writerOnly hides the ResponseWriter's ReadFrom, so that io.CopyBuffer
// uses the buffer it is given.
type writerOnly struct{ w io.Writer }

func (w writerOnly) Write(p []byte) (int, error) { return w.w.Write(p) }

func (s *Server) writeFile(w http.ResponseWriter, r *http.Request, svc *sessions.Service, principal, session, p string) {
	tooLarge := fmt.Sprintf("a file sent to a session is at most %d MiB", MaxFileBytes>>20)
	if r.ContentLength > MaxFileBytes {
		writeError(w, http.StatusRequestEntityTooLarge, wire.CodeTooLarge, tooLarge)
		return
	}
	s.opts.Dispatcher.NoteUpload(r.Context(), principal, session, p)
	f, err := svc.WriteFile(r.Context(), principal, session, p, http.MaxBytesReader(w, r.Body, MaxFileBytes))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		writeError(w, http.StatusRequestEntityTooLarge, wire.CodeTooLarge, tooLarge)
		return
	}
	if err != nil {
		s.writeSessionError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"session": session, "file": toFileJSON(f)})
}

func (s *Server) removeFile(w http.ResponseWriter, r *http.Request, svc *sessions.Service, principal, session, p string) {
	if err := svc.RemoveFile(r.Context(), principal, session, p); err != nil {
		s.writeSessionError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// listRuns reads the ledger of session runs: the caller's own, or for an
// admin everyone's (or one principal's with ?principal=).
func (s *Server) listRuns(w http.ResponseWriter, r *http.Request, id auth.Identity, svc *sessions.Service) {
	q := r.URL.Query()
	f := sessions.RunFilter{Principal: id.Name, Session: q.Get("session"), Tool: q.Get("tool")}
	if id.Role == auth.Admin {
		f.Principal = q.Get("principal")
	} else if p := q.Get("principal"); p != "" && p != id.Name {
		writeJSON(w, http.StatusOK, map[string]any{"runs": []sessions.RunEntry{}})
		return
	}
	if f.Session != "" {
		if err := sessions.CheckID(f.Session); err != nil {
			s.writeSessionError(w, err)
			return
		}
	}
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			writeError(w, http.StatusBadRequest, wire.CodeBadArgs, fmt.Sprintf("since must be a time like \"2026-11-29T14:00:00Z\" (RFC 3339), not %q", v))
			return
		}
		f.Since = t
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > sessions.MaxRunLimit {
			writeError(w, http.StatusBadRequest, wire.CodeBadArgs, fmt.Sprintf("limit must be a number from 1 to %d, not %q", sessions.MaxRunLimit, v))
			return
		}
		f.Limit = n
	}
	list, err := svc.Runs(r.Context(), f)
	if err != nil {
		s.writeSessionError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"runs": list})
}

// sessionStatus is the HTTP status of a sessions error's code.
func sessionStatus(code string) int {
	switch code {
	case wire.CodeNotFound:
		return http.StatusNotFound
	case wire.CodeBadArgs, wire.CodeBadPath:
		return http.StatusBadRequest
	case wire.CodeForbidden:
		return http.StatusForbidden
	case wire.CodeTooManySessions, wire.CodeTooManyTransfers:
		return http.StatusTooManyRequests
	case wire.CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case wire.CodeDiskFull:
		return http.StatusInsufficientStorage
	case wire.CodeUnsupported:
		return http.StatusNotImplemented
	case wire.CodePluginUnavailable, wire.CodePluginCrashed, wire.CodeStoreUnavailable, wire.CodeSessionUnavailable:
		return http.StatusServiceUnavailable
	case wire.CodeTimeout:
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

func (s *Server) writeSessionError(w http.ResponseWriter, err error) {
	var ce *errcode.Error
	if errors.As(err, &ce) && ce.Code != "" {
		status := sessionStatus(ce.Code)
		if status == http.StatusInternalServerError {
			s.opts.Logger.Error("a sessions request failed", "code", ce.Code, "error", ce.Message)
		}
		if ce.Code == wire.CodeTooManyTransfers {
			w.Header().Set("Retry-After", strconv.Itoa(sessions.TransferRetrySeconds))
		}
		writeError(w, status, ce.Code, ce.Message)
		return
	}
	s.opts.Logger.Error("a sessions request failed", "error", err)
	writeError(w, http.StatusInternalServerError, wire.CodeFailed, err.Error())
}

// visibleSpecs are the specs of the tools a caller is shown
// (visibleTools), in the default format.
func (s *Server) visibleSpecs(id auth.Identity) []tools.FunctionSpec {
	list := s.visibleTools(id)
	out := make([]tools.FunctionSpec, len(list))
	for i, t := range list {
		out[i] = t.Spec()
	}
	return out
}

// showsSessions says whether the caller is shown the session tools.
func (s *Server) showsSessions(id auth.Identity) bool {
	svc := s.opts.Sessions
	return svc != nil && svc.Ready() == nil && svc.MayUse(id.Role)
}
