// Package tools holds the tools the host serves: each one loaded from the
// config, checked by its kind's plugin, and turned into the JSON Schema
// function spec models take; and the check of a call's arguments against a
// tool's params before any plugin sees them.
package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/hostside"
)

// Tool is a tool as served: its definition and its run table as the kind's
// plugin normalised it.
type Tool struct {
	config.Tool
	// Kind is run.type.
	Kind string
	// Run is the normalised run table.
	Run json.RawMessage
	// resolved is Schema made ready to validate with, by Check; CheckArgs
	// makes it itself for a Tool made otherwise.
	resolved *jsonschema.Resolved
}

// SDK returns the tool in the SDK's terms, as a plugin receives it.
func (t *Tool) SDK() sdk.Tool {
	params := make([]sdk.Param, len(t.Params))
	for i, p := range t.Params {
		params[i] = sdk.Param{Name: p.Name, Type: p.Type, Required: p.Required, Options: p.Options, Description: p.Description}
	}
	return sdk.Tool{Name: t.Name, Description: t.Description, Effect: t.Effect, Params: params, Run: t.Run, Source: t.Source}
}

// Checker checks a tool of one kind; a plugin is one. catalog is every
// tool loaded with it (see Catalog), for kinds whose tools call others.
type Checker interface {
	Check(ctx context.Context, tool sdk.Tool, catalog []sdk.Tool) (json.RawMessage, error)
}

// Catalog is defs as a kind's Check sees the tools loaded with the one it
// checks: name, description, effect, params and source, and a run table
// of only {"type": kind}.
func Catalog(defs []config.Tool) []sdk.Tool {
	out := make([]sdk.Tool, 0, len(defs))
	for _, def := range defs {
		t := Tool{Tool: def, Kind: def.Kind()}
		t.Run, _ = json.Marshal(map[string]string{"type": def.Kind()})
		out = append(out, t.SDK())
	}
	return out
}

// CatalogWith is the catalog of the tools served now, with def added (or
// in place of the served tool of its name): what a tool checked on its
// own is checked against.
func (r *Registry) CatalogWith(def config.Tool) []sdk.Tool {
	defs := []config.Tool{def}
	for _, t := range r.List() {
		if t.Name != def.Name {
			defs = append(defs, t.Tool)
		}
	}
	return Catalog(defs)
}

// Kinds finds the checker of a kind. ok is false when no plugin serves it;
// why then says what is wrong, if something is known.
type Kinds func(kind string) (c Checker, ok bool, why string)

// Registry is the set of tools being served. It is safe for concurrent
// use; Replace swaps the whole set at once.
type Registry struct {
	mu    sync.RWMutex
	tools map[string]*Tool
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{tools: map[string]*Tool{}} }

// Get returns a served tool by name.
func (r *Registry) Get(name string) (*Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tools[name]
	return t, ok
}

// List returns the served tools sorted by name.
func (r *Registry) List() []*Tool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*Tool, 0, len(r.tools))
	for _, t := range r.tools {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Replace makes tools the served set.
func (r *Registry) Replace(tools []*Tool) {
	m := make(map[string]*Tool, len(tools))
	for _, t := range tools {
		m[t.Name] = t
	}
	r.mu.Lock()
	r.tools = m
	r.mu.Unlock()
}

// Add serves a tool unless one of that name is served already, and says
// whether it did.
func (r *Registry) Add(t *Tool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, taken := r.tools[t.Name]; taken {
		return false
	}
	r.tools[t.Name] = t
	return true
}

// Unchecked says whether Check failed because the tool could not be
// checked just now (its plugin could not do it), not because it is wrong:
// checking it again later may pass.
func Unchecked(err error) bool {
	var cu *hostside.CheckUnavailableError
	return errors.As(err, &cu) || errors.Is(err, &sdk.Error{Code: wire.CodePluginUnavailable})
}

// CheckAll checks each tool with its kind's plugin. It returns the tools
// that passed and, for the others, errors with file and line; those that
// could not be checked just now are also in later, to be checked again.
// Names are unique already (config.AllTools reports a name used twice).
func CheckAll(ctx context.Context, defs []config.Tool, kinds Kinds) (ok []*Tool, errs config.Errors, later []config.Tool) {
	catalog := Catalog(defs)
	for _, def := range defs {
		t, err := Check(ctx, def, kinds, catalog)
		if Unchecked(err) {
			later = append(later, def)
		}
		if err != nil {
			var ce config.Errors
			var ue *uncheckedError
			if errors.As(err, &ue) {
				errs = append(errs, ue.Errors()...)
			} else if errors.As(err, &ce) {
				errs = append(errs, ce...)
			} else {
				errs = append(errs, config.Error{File: def.File, Line: def.Line, Message: err.Error()})
			}
			continue
		}
		ok = append(ok, t)
	}
	return ok, errs, later
}

// Check checks one tool with its kind's plugin, against the catalog of the
// tools loaded with it. A tool the plugin refuses gives config.Errors
// placed at the lines of the fields named.
func Check(ctx context.Context, def config.Tool, kinds Kinds, catalog []sdk.Tool) (*Tool, error) {
	kind, _ := def.Run["type"].(string)
	checker, ok, why := kinds(kind)
	if !ok {
		msg := fmt.Sprintf("no plugin serves the %q kind (expected toolhost-plugin-%s in the plugin folder)", kind, kind)
		if why != "" {
			msg = fmt.Sprintf("the %q kind is not available: %s", kind, why)
		}
		return nil, config.Errors{def.ErrorAt("run.type", msg)}
	}
	t := &Tool{Tool: def, Kind: kind}
	raw, err := json.Marshal(def.Run)
	if err != nil {
		return nil, fmt.Errorf("the run table of %s can't be sent to its plugin: %w", def.Name, err)
	}
	t.Run = raw
	norm, err := checker.Check(ctx, t.SDK(), catalog)
	if err != nil {
		var fe sdk.FieldErrors
		if !errors.As(err, &fe) {
			return nil, &uncheckedError{def: def, err: err}
		}
		ce := make(config.Errors, len(fe))
		for i, e := range fe {
			ce[i] = def.ErrorAt(e.Path, e.Message)
		}
		return nil, ce
	}
	t.Run = norm
	if t.resolved, err = t.resolvedSchema(); err != nil {
		return nil, err
	}
	return t, nil
}

// uncheckedError is a tool its plugin could not check: placed at the tool's
// line, and still Unchecked.
type uncheckedError struct {
	def config.Tool
	err error
}

func (e *uncheckedError) Error() string { return e.Errors().Error() }

func (e *uncheckedError) Unwrap() error { return e.err }

// Errors places the failure at the tool's line.
func (e *uncheckedError) Errors() config.Errors {
	return config.Errors{{File: e.def.File, Line: e.def.Line, Message: fmt.Sprintf("the tool %s could not be checked (it will be tried again): %v", e.def.Name, e.err)}}
}
