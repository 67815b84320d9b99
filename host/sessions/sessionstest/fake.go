// Package sessionstest is a session backend in memory for tests of the
// host's sessions (ownership, the API, the store, expiry): workspaces are
// maps of files, and every call is recorded. It isolates nothing; the real
// backend is the python plugin's.
package sessionstest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/errcode"
	"github.com/toolhost/toolhost/sdk/hostside"
)

// Backend keeps workspaces in memory. The zero value is not ready: use New.
type Backend struct {
	mu sync.Mutex
	// Workspaces are the files of each backend id.
	workspaces map[string]map[string][]byte
	configs    []sdk.SessionsConfig
	deleted    []string
	stopped    []string
	keeps      [][]string
	// FailDelete, when set, is returned by Delete.
	FailDelete error
	// BeforeReconcile, when set, is called as Reconcile starts, before it
	// looks at the workspaces: after the host has read the ids it keeps.
	BeforeReconcile func()
	// BeforeTransfer, when set, is called as WriteFile and ReadFile start,
	// before they read or write anything: a test holds a transfer going
	// by blocking in it.
	BeforeTransfer func(id, path string)
	writes         int // calls of WriteFile
}

// New returns an empty Backend.
func New() *Backend { return &Backend{workspaces: map[string]map[string][]byte{}} }

// ConfigureSessions records cfg.
func (b *Backend) ConfigureSessions(_ context.Context, cfg sdk.SessionsConfig) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.configs = append(b.configs, cfg)
	return nil
}

// Configs are the configurations given, in order.
func (b *Backend) Configs() []sdk.SessionsConfig {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.configs)
}

// ListFiles lists a workspace, folders included; not_found when there is
// none.
func (b *Backend) ListFiles(_ context.Context, id string) ([]sdk.SessionFile, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ws, ok := b.workspaces[id]
	if !ok {
		return nil, errcode.New(wire.CodeNotFound, "no such session")
	}
	dirs := map[string]bool{}
	var out []sdk.SessionFile
	for p, data := range ws {
		out = append(out, sdk.SessionFile{Path: p, Size: int64(len(data)), ModTime: time.Unix(0, 0)})
		for i := strings.LastIndex(p, "/"); i > 0; i = strings.LastIndex(p[:i], "/") {
			dirs[p[:i]] = true
		}
	}
	for d := range dirs {
		out = append(out, sdk.SessionFile{Path: d, Dir: true, ModTime: time.Unix(0, 0)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// ReadFile reads a file.
func (b *Backend) ReadFile(_ context.Context, id, path string, max int64) ([]byte, error) {
	if b.BeforeTransfer != nil {
		b.BeforeTransfer(id, path)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	data, ok := b.workspaces[id][path]
	if !ok {
		return nil, errcode.Errorf(wire.CodeNotFound, "there is no file %s", path)
	}
	if max > 0 && int64(len(data)) > max {
		return nil, errcode.Errorf(wire.CodeTooLarge, "%s is larger than %d bytes", path, max)
	}
	return slices.Clone(data), nil
}

// OpenFile opens a file to read: a copy of it as it is now.
func (b *Backend) OpenFile(ctx context.Context, id, path string, max int64) (io.ReadCloser, int64, error) {
	data, err := b.ReadFile(ctx, id, path, max)
	if err != nil {
		return nil, 0, err
	}
	return io.NopCloser(bytes.NewReader(data)), int64(len(data)), nil
}

// WriteFile writes a file, making the workspace.
func (b *Backend) WriteFile(_ context.Context, id, path string, r io.Reader) (sdk.SessionFile, error) {
	b.mu.Lock()
	b.writes++
	b.mu.Unlock()
	if b.BeforeTransfer != nil {
		b.BeforeTransfer(id, path)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return sdk.SessionFile{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.workspaces[id] == nil {
		b.workspaces[id] = map[string][]byte{}
	}
	b.workspaces[id][path] = data
	return sdk.SessionFile{Path: path, Size: int64(len(data)), ModTime: time.Unix(0, 0)}, nil
}

// RemoveFile removes a file.
func (b *Backend) RemoveFile(_ context.Context, id, path string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.workspaces[id][path]; !ok {
		return errcode.Errorf(wire.CodeNotFound, "there is no file %s", path)
	}
	delete(b.workspaces[id], path)
	return nil
}

// StopSession records the stop.
func (b *Backend) StopSession(_ context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopped = append(b.stopped, id)
	return nil
}

// Stopped are the ids whose sandbox was stopped, in order.
func (b *Backend) Stopped() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.stopped)
}

// Writes is how many times WriteFile was called.
func (b *Backend) Writes() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.writes
}

// DeleteSession removes a workspace; not_found when there is none.
func (b *Backend) DeleteSession(_ context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.FailDelete != nil {
		return b.FailDelete
	}
	if _, ok := b.workspaces[id]; !ok {
		return errcode.New(wire.CodeNotFound, "no such session")
	}
	delete(b.workspaces, id)
	b.deleted = append(b.deleted, id)
	return nil
}

// Deleted are the ids deleted, in order.
func (b *Backend) Deleted() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.deleted)
}

// Reconcile keeps the workspaces of keep and removes the others.
func (b *Backend) Reconcile(_ context.Context, keep []string) ([]string, error) {
	if b.BeforeReconcile != nil {
		b.BeforeReconcile()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.keeps = append(b.keeps, slices.Clone(keep))
	var removed []string
	for id := range b.workspaces {
		if !slices.Contains(keep, id) {
			removed = append(removed, id)
			delete(b.workspaces, id)
		}
	}
	sort.Strings(removed)
	return removed, nil
}

// Keeps are the keep lists Reconcile was given, in order.
func (b *Backend) Keeps() [][]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.keeps)
}

// Has says whether a workspace exists.
func (b *Backend) Has(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.workspaces[id]
	return ok
}

// Put makes a workspace with a file, as a run would.
func (b *Backend) Put(id, path, data string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.workspaces[id] == nil {
		b.workspaces[id] = map[string][]byte{}
	}
	b.workspaces[id][path] = []byte(data)
}

// Kind is a fake python kind's invoker for session tools: it runs nothing,
// but answers as the python kind does ({"exit_code","stdout","stderr",
// "stopped","message"}) from what a test scripts, and records every
// invocation.
type Kind struct {
	mu   sync.Mutex
	invs []hostside.Invocation
	// Answer makes the answer to an invocation; nil prints "ok" and exits 0.
	Answer func(ctx context.Context, inv hostside.Invocation, onEvent func(sdk.Event)) (json.RawMessage, error)
	// Backend, when set, gets a workspace for each session run in (as the
	// real kind makes one at the first run).
	Backend *Backend
}

// Invoke records inv and answers it.
func (k *Kind) Invoke(ctx context.Context, inv hostside.Invocation, onEvent func(sdk.Event)) (json.RawMessage, error) {
	k.mu.Lock()
	k.invs = append(k.invs, inv)
	k.mu.Unlock()
	if k.Backend != nil && inv.Session != "" {
		k.Backend.mu.Lock()
		if k.Backend.workspaces[inv.Session] == nil {
			k.Backend.workspaces[inv.Session] = map[string][]byte{}
		}
		k.Backend.mu.Unlock()
	}
	if k.Answer != nil {
		return k.Answer(ctx, inv, onEvent)
	}
	if onEvent != nil {
		onEvent(sdk.Event{Stdout: []byte("ok\n")})
	}
	return json.RawMessage(`{"exit_code":0,"stdout":"ok\n","stderr":"","stopped":"","message":""}`), nil
}

// Invocations are the invocations made, in order.
func (k *Kind) Invocations() []hostside.Invocation {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.invs)
}
