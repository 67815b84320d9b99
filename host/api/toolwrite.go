package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/pelletier/go-toml/v2"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/auth"
	"github.com/toolhost/toolhost/host/tools"
	"github.com/toolhost/toolhost/sdk"
)

// ToolFiles are the tool files of tools_dir, which the host serves. The
// API reads them for everyone signed in and writes and removes them for
// admins; the files stay the source of truth, which an admin may also
// edit by hand.
type ToolFiles interface {
	// Find says where the tool called name is defined: a file of
	// tools_dir or a [[tool]] table of the main config. ok is false when
	// neither defines it.
	Find(name string) (f ToolFile, ok bool)
	// Write writes data, one tool in TOML that passed its check, as the
	// file of the tool called name, atomically, and serves the tools
	// again. Writes are made one at a time. A refusal is a
	// *ToolFileError.
	Write(ctx context.Context, name string, data []byte) (ToolWritten, error)
	// Remove removes the file of the tool called name and serves the
	// tools again. A refusal is a *ToolFileError.
	Remove(ctx context.Context, name string) error
}

// ToolFile is where a tool is defined.
type ToolFile struct {
	// Def is the tool as written there (Source is its file:line).
	Def config.Tool
	// Editable says whether the API may replace or remove it; when not,
	// NotEditable says why, and where to change it instead.
	Editable    bool
	NotEditable string
	// Text is the file's text, for a file of tools_dir.
	Text string
}

// ToolWritten is what a write did.
type ToolWritten struct {
	// File is the file written.
	File string
	// Created says no tool of that name was defined before.
	Created bool
	// Problems say why the tool written is not served after all: it
	// passed its check, and something changed before it was loaded (its
	// kind's plugin stopped, a tool it calls was removed).
	Problems config.Errors
}

// ToolFileError is a write or a removal refused: Code is wire.CodeNotEditable,
// wire.CodeNoToolsDir or wire.CodeUnknownTool; Message says why, and what to do.
type ToolFileError struct {
	Code    string
	Message string
}

func (e *ToolFileError) Error() string { return e.Message }

// status is the HTTP status of a refusal.
func (e *ToolFileError) status() int {
	if e.Code == wire.CodeUnknownTool {
		return http.StatusNotFound
	}
	return http.StatusConflict
}

// requestError is a request refused before any tool is looked at.
type requestError struct {
	status        int
	code, message string
}

func (e *requestError) Error() string { return e.message }

// mayWrite says why id may not write (or remove) a tool whose kinds are
// given (the kind written, and the kind of the tool it replaces), or nil.
func (s *Server) mayWrite(id auth.Identity, kinds ...string) error {
	// A kind whose tools are code that runs on this machine (in gVisor,
	// but code all the same) says so (sdk.Info.AdminWritesOnly): only
	// admins may ever write or remove one, whatever the rule below becomes
	// for the other kinds. A kind that can't say (no plugin runs it) is
	// taken as one.
	for _, kind := range kinds {
		info, ok := s.kindInfo(kind)
		if (!ok || info.AdminWritesOnly) && id.Role != auth.Admin {
			return fmt.Errorf("%s is %s, and %s tools may only ever be written or deleted by admins", id.Name, withArticle(id.Role), kind)
		}
	}
	if id.Role != auth.Admin {
		return fmt.Errorf("%s is %s: only admins may write or delete tools", id.Name, withArticle(id.Role))
	}
	return nil
}

func withArticle(role string) string {
	if role == auth.Admin {
		return "an admin"
	}
	if role == auth.Editor {
		return "an editor"
	}
	return "a " + role
}

// toolName is the tool named in the request's path, or an error saying why
// it is not a tool's name.
func toolName(r *http.Request) (string, error) {
	name := r.PathValue("name")
	if err := config.CheckToolName(name); err != nil {
		return "", &requestError{http.StatusBadRequest, wire.CodeBadName, err.Error() + " (the address names a tool as its name field does)"}
	}
	return name, nil
}

// sentTool is a tool sent in a request, as the TOML it is parsed and
// written as.
type sentTool struct {
	data []byte
	// fromJSON says it was sent as JSON: its lines are those of the TOML
	// made of it, and mean nothing to the sender.
	fromJSON bool
	// added is how many lines were put before the sender's first line
	// (the name, filled in).
	added int
}

// readTool reads the tool in the request's body: TOML (Content-Type
// application/toml, text/plain, curl's default or none) or JSON (application/json, the
// shape check returns), which is made TOML. When name is not "" and the
// tool has no name, it is given name.
func readTool(r *http.Request, name string) (sentTool, error) {
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(data) > maxBody {
		return sentTool{}, &requestError{http.StatusRequestEntityTooLarge, wire.CodeTooLarge, "a tool must be at most 1 MiB of TOML or JSON"}
	}
	media := ""
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if media, _, err = mime.ParseMediaType(ct); err != nil {
			media = ct
		}
	}
	switch media {
	// curl -d and --data-binary send form-urlencoded unless told otherwise:
	// the body is the file as written, so it is read as TOML.
	case "", "application/toml", "text/plain", "text/x-toml", "application/x-www-form-urlencoded":
		if name == "" {
			return sentTool{data: data}, nil
		}
		var probe map[string]any
		if toml.Unmarshal(data, &probe) == nil {
			if _, named := probe["name"]; !named {
				return sentTool{data: append(fmt.Appendf(nil, "name = %q\n", name), data...), added: 1}, nil
			}
		}
		return sentTool{data: data}, nil
	case "application/json":
		m, err := config.DecodeJSONTool(data)
		if err != nil {
			var ce config.Errors
			if errors.As(err, &ce) {
				return sentTool{fromJSON: true}, err
			}
			return sentTool{}, &requestError{http.StatusBadRequest, wire.CodeBadRequest, err.Error()}
		}
		if n, _ := m["name"].(string); n == "" && name != "" {
			m["name"] = name
		}
		out, err := config.FormatTool(m)
		if err != nil {
			return sentTool{}, &requestError{http.StatusBadRequest, wire.CodeBadRequest, "the tool can't be written as TOML: " + err.Error()}
		}
		return sentTool{data: out, fromJSON: true}, nil
	}
	return sentTool{}, &requestError{http.StatusUnsupportedMediaType, wire.CodeUnsupportedMediaType,
		fmt.Sprintf("send the tool as TOML (Content-Type: application/toml) or JSON (application/json), not %s", media)}
}

// parseTool reads and parses the request's tool; with name not "", the tool
// must have that name (or none, and is given it).
func parseTool(r *http.Request, name string) (sentTool, config.Tool, error) {
	src, err := readTool(r, name)
	if err != nil {
		return src, config.Tool{}, err
	}
	def, err := config.ParseTool("request", src.data)
	if err != nil {
		return src, def, err
	}
	if name != "" && def.Name != name {
		return src, def, config.Errors{def.ErrorAt("name", fmt.Sprintf("the tool is named %q here, but the address names %q: they must be the same (or leave name out)", def.Name, name))}
	}
	return src, def, nil
}

// writeRefusal answers a request refused: a requestError or
// ToolFileError with its status, anything else as the errors of a check
// (422), placed at the lines the sender wrote.
func writeRefusal(w http.ResponseWriter, src sentTool, err error) {
	var re *requestError
	var fe *ToolFileError
	switch {
	case errors.As(err, &re):
		writeError(w, re.status, re.code, re.message)
	case errors.As(err, &fe):
		writeError(w, fe.status(), fe.Code, fe.Message)
	default:
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"ok": false, "errors": checkErrors(src, err)})
	}
}

// checkErrors lists the problems of a check as the check endpoint gives
// them, each at the line its sender wrote (none for a tool sent as JSON).
func checkErrors(src sentTool, err error) []map[string]any {
	var ce config.Errors
	if !errors.As(err, &ce) {
		ce = config.Errors{{File: "request", Message: err.Error()}}
	}
	list := make([]map[string]any, len(ce))
	for i, e := range ce {
		switch {
		case src.fromJSON:
			e.Line, e.Column = 0, 0
		case e.Line > src.added:
			e.Line -= src.added
		case e.Line > 0:
			e.Line = 1 // the name filled in
		}
		list[i] = map[string]any{"line": e.Line, "field": e.Field, "message": e.Message, "text": e.Error()}
	}
	return list
}

// paramJSON is a parameter as the API gives it: the keys of a tool file.
type paramJSON struct {
	Name        string   `json:"name"`
	Kind        string   `json:"kind"`
	Description string   `json:"description,omitempty"`
	Required    bool     `json:"required,omitempty"`
	Options     []string `json:"options,omitempty"`
	Items       string   `json:"items,omitempty"`
}

// toolJSON is a tool as the API gives it, with the keys of a tool file:
// sent back as JSON to PUT, it writes the same tool.
func toolJSON(t *tools.Tool) map[string]any {
	params := make([]paramJSON, len(t.Params))
	for i, p := range t.Params {
		params[i] = paramJSON{Name: p.Name, Kind: p.Type, Description: p.Description, Required: p.Required, Options: p.Options, Items: p.Items}
	}
	var run any
	_ = json.Unmarshal(t.Run, &run)
	return map[string]any{"name": t.Name, "description": t.Description, "effect": t.Effect, "params": params, "run": run}
}

// putTool writes a tool's file, for admins: the tool is checked as check
// checks it, written into tools_dir, and served at once.
func (s *Server) putTool(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	if err := s.mayWrite(id); err != nil {
		forbidden(w, err.Error())
		return
	}
	name, err := toolName(r)
	if err != nil {
		writeRefusal(w, sentTool{}, err)
		return
	}
	files := s.opts.ToolFiles
	if files == nil {
		writeError(w, http.StatusNotFound, wire.CodeNotFound, "this host does not write tools")
		return
	}
	src, def, err := parseTool(r, name)
	if err != nil {
		writeRefusal(w, src, err)
		return
	}
	kinds := []string{def.Kind()}
	old, found := files.Find(name)
	if found {
		if !old.Editable {
			writeError(w, http.StatusConflict, wire.CodeNotEditable, old.NotEditable)
			return
		}
		kinds = append(kinds, old.Def.Kind())
	}
	if err := s.mayWrite(id, kinds...); err != nil {
		forbidden(w, err.Error())
		return
	}
	checked, err := s.opts.Check(r.Context(), def)
	if err != nil {
		writeRefusal(w, src, err)
		return
	}
	done, err := files.Write(r.Context(), name, src.data)
	if err != nil {
		var fe *ToolFileError
		if !errors.As(err, &fe) {
			s.opts.Logger.Error("a tool file could not be written", "tool", name, "error", err)
			writeError(w, http.StatusInternalServerError, wire.CodeFailed, "the tool's file could not be written: "+err.Error())
			return
		}
		writeRefusal(w, src, err)
		return
	}
	s.opts.Logger.Info("tool written", "tool", name, "file", done.File, "by", id.Name, "created", done.Created)
	body := map[string]any{"ok": true, "file": done.File}
	if served, ok := s.opts.Registry.Get(name); ok {
		body["tool"], body["spec"], body["served"] = toolJSON(served), served.Spec(), true
	} else {
		body["tool"], body["spec"], body["served"] = toolJSON(checked), checked.Spec(), false
		body["problems"] = checkErrors(sentTool{}, done.Problems)
	}
	status := http.StatusOK
	if done.Created {
		status = http.StatusCreated
	}
	writeJSON(w, status, body)
}

// deleteTool removes a tool's file, for admins; the tool is no longer
// served from then on.
func (s *Server) deleteTool(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	if err := s.mayWrite(id); err != nil {
		forbidden(w, err.Error())
		return
	}
	name, err := toolName(r)
	if err != nil {
		writeRefusal(w, sentTool{}, err)
		return
	}
	files := s.opts.ToolFiles
	if files == nil {
		writeError(w, http.StatusNotFound, wire.CodeNotFound, "this host does not write tools")
		return
	}
	old, found := files.Find(name)
	if !found {
		writeError(w, http.StatusNotFound, wire.CodeUnknownTool, fmt.Sprintf("no tool named %q is defined (in tools_dir or the main config)", name))
		return
	}
	if !old.Editable {
		writeError(w, http.StatusConflict, wire.CodeNotEditable, old.NotEditable)
		return
	}
	if err := s.mayWrite(id, old.Def.Kind()); err != nil {
		forbidden(w, err.Error())
		return
	}
	if err := files.Remove(r.Context(), name); err != nil {
		var fe *ToolFileError
		if !errors.As(err, &fe) {
			s.opts.Logger.Error("a tool file could not be removed", "tool", name, "error", err)
			writeError(w, http.StatusInternalServerError, wire.CodeFailed, "the tool's file could not be removed: "+err.Error())
			return
		}
		writeRefusal(w, sentTool{}, err)
		return
	}
	s.opts.Logger.Info("tool deleted", "tool", name, "file", old.Def.File, "by", id.Name)
	w.WriteHeader(http.StatusNoContent)
}

// kindInfo is what kind said of itself in Describe; ok is false when no
// plugin serves it.
func (s *Server) kindInfo(kind string) (sdk.Info, bool) {
	if s.opts.Kinds == nil {
		return sdk.Info{}, false
	}
	return s.opts.Kinds(kind)
}

// runIsOpen says whether every signed-in role may read the run tables of
// kind's tools (GET /api/v1/tools/{name}): a graph's wiring and a prompt's
// text are what the web UI draws for everyone (sdk.Info.OpenRunTable);
// other kinds' run tables are for admins.
func (s *Server) runIsOpen(kind string) bool {
	info, ok := s.kindInfo(kind)
	return ok && info.OpenRunTable
}

// getTool gives a tool's definition, for the web UI's editor: as check
// gives it (as served, when it is), where it is defined, whether the API
// may change it, and, to those who may, the file's text.

func (s *Server) getTool(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	name, err := toolName(r)
	if err != nil {
		writeRefusal(w, sentTool{}, err)
		return
	}
	var f ToolFile
	found := false
	if s.opts.ToolFiles != nil {
		f, found = s.opts.ToolFiles.Find(name)
	}
	if !found {
		writeError(w, http.StatusNotFound, wire.CodeUnknownTool, fmt.Sprintf("no tool named %q is defined (in tools_dir or the main config)", name))
		return
	}
	body := map[string]any{"source": f.Def.Source, "editable": f.Editable}
	if served, ok := s.opts.Registry.Get(name); ok {
		body["tool"], body["spec"], body["served"] = toolJSON(served), served.Spec(), true
	} else {
		t := &tools.Tool{Tool: f.Def, Kind: f.Def.Kind()}
		t.Run, _ = json.Marshal(f.Def.Run)
		body["tool"], body["served"] = toolJSON(t), false
	}
	if kind := f.Def.Kind(); id.Role != auth.Admin && !s.runIsOpen(kind) {
		// An http tool's headers or a kind's settings may hold a secret
		// written into the file; the drawings and prompts the editor shows
		// to everyone hold none.
		body["tool"].(map[string]any)["run"] = map[string]any{"type": kind}
		body["run_hidden"] = fmt.Sprintf("only admins read the run table of a %s tool: it may hold secrets such as headers", kind)
	}
	if !f.Editable {
		body["not_editable"] = f.NotEditable
	}
	// The file's text, comments and all, is for those who may edit it.
	if f.Text != "" && s.mayWrite(id, f.Def.Kind()) == nil {
		body["toml"] = f.Text
	}
	writeJSON(w, http.StatusOK, body)
}
