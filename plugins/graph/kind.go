package main

import (
	"context"
	"encoding/json"
	"strings"
	"sync"

	"github.com/toolhost/toolhost/sdk"
)

// version is this kind's own version.
const version = "0.1.0"

// kind is the graph kind. Its zero value is ready: until Configure is
// called it uses the default settings.
type kind struct {
	mu  sync.Mutex
	cfg *config
	// graphs are the graphs compiled for runs, by tool (see compiled).
	graphs map[string]*graph
}

// maxCompiled bounds the graphs kept compiled; past it the cache starts
// again.
const maxCompiled = 256

var (
	_ sdk.Kind           = (*kind)(nil)
	_ sdk.CatalogChecker = (*kind)(nil)
)

func (k *kind) Describe(context.Context) (sdk.Info, error) {
	return sdk.Info{Kind: "graph", Version: version, RunSchema: json.RawMessage(runSchema), ConfigSchema: json.RawMessage(configSchema),
		OpenRunTable: true}, nil
}

func (k *kind) Configure(_ context.Context, raw json.RawMessage) error {
	cfg, err := parseConfig(raw)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.cfg = &cfg
	k.mu.Unlock()
	return nil
}

// Check checks everything but the tools call_tool nodes call: with no
// catalog this kind can't know them, and the host checks each call's
// arguments when it is made.
func (k *kind) Check(_ context.Context, tool sdk.Tool) (json.RawMessage, error) {
	g, err := compile(tool, nil)
	if err != nil {
		return nil, err
	}
	return g.normalise(), nil
}

// CheckWithCatalog is Check, with the call_tool nodes checked against the
// tools the host serves: the tool is there, its required parameters are
// wired, every argument is one of its parameters and of a type it takes.
func (k *kind) CheckWithCatalog(_ context.Context, tool sdk.Tool, catalog []sdk.Tool) (json.RawMessage, error) {
	byName := make(map[string]sdk.Tool, len(catalog))
	for _, t := range catalog {
		byName[t.Name] = t
	}
	g, err := compile(tool, byName)
	if err != nil {
		return nil, err
	}
	return g.normalise(), nil
}

func (k *kind) Invoke(ctx context.Context, call sdk.Call, emit sdk.Emit) (json.RawMessage, error) {
	g, err := k.compiled(call.Tool)
	if err != nil {
		return nil, sdk.Errorf(codeBadTool, "the tool %s is not a graph this host can run: %s", call.Tool.Name, strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	args := map[string]any{}
	if v, err := decodeJSON(call.Args); err == nil {
		if m, ok := v.(map[string]any); ok {
			args = m
		}
	}
	r := &runner{g: g, host: call.Host, emit: emit, runID: call.RunID, tool: call.Tool.Name, args: args,
		maxNested: int64(k.config().MaxNestedCalls)}
	v, err := r.run(ctx)
	if err != nil {
		return nil, err
	}
	return marshal(v)
}

// config is the current settings.
func (k *kind) config() config {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cfg == nil {
		return defaultConfig()
	}
	return *k.cfg
}

// compiled is the tool's graph, compiled once for all its runs: a graph
// is read-only once compiled, and the host hands every run the same
// normalised run table and params.
func (k *kind) compiled(tool sdk.Tool) (*graph, error) {
	params, err := json.Marshal(tool.Params)
	if err != nil {
		return nil, err
	}
	key := tool.Name + "\x00" + string(params) + "\x00" + string(tool.Run)
	k.mu.Lock()
	g, ok := k.graphs[key]
	k.mu.Unlock()
	if ok {
		return g, nil
	}
	g, err = compile(tool, nil)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	if k.graphs == nil || len(k.graphs) >= maxCompiled {
		k.graphs = map[string]*graph{}
	}
	k.graphs[key] = g
	k.mu.Unlock()
	return g, nil
}
