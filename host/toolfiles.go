package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/toolhost/toolhost/client/wire"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/api"
)

// toolFiles are the tool files of tools_dir as the API reads, writes and
// removes them (api.ToolFiles). A write goes to a temporary file of the
// same folder whose name the loader never reads (it starts with a dot and
// does not end in .toml), synced, then renamed over the tool's file, so a
// load at any moment reads the old file or the new one, whole. After a
// write or a removal the tools are loaded again as a reload loads them:
// the files stay the source of truth.
type toolFiles struct {
	h *Host
	// mu makes writes and removals one at a time.
	mu sync.Mutex
}

var _ api.ToolFiles = (*toolFiles)(nil)

// Find says where the tool called name is defined.
func (f *toolFiles) Find(name string) (api.ToolFile, bool) {
	cfg := f.h.config()
	if def, ok := inConfig(cfg, name); ok {
		return api.ToolFile{Def: def, NotEditable: notInToolsDir(def)}, true
	}
	if cfg.ToolsDir == "" {
		return api.ToolFile{}, false
	}
	def, ok := findToolFile(cfg.ToolsDir, name)
	if !ok {
		return api.ToolFile{}, false
	}
	tf := api.ToolFile{Def: def, Editable: true}
	if why := notWritable(def.File); why != "" {
		tf.Editable, tf.NotEditable = false, why
	}
	if data, err := os.ReadFile(def.File); err == nil {
		tf.Text = string(data)
	}
	return tf, true
}

// Write writes data as the file of the tool called name: the file that
// defines it now, or <name>.toml in tools_dir; then loads the tools again.
func (f *toolFiles) Write(ctx context.Context, name string, data []byte) (api.ToolWritten, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cfg := f.h.config()
	if def, ok := inConfig(cfg, name); ok {
		return api.ToolWritten{}, &api.ToolFileError{Code: wire.CodeNotEditable, Message: notInToolsDir(def)}
	}
	if cfg.ToolsDir == "" {
		return api.ToolWritten{}, &api.ToolFileError{Code: wire.CodeNoToolsDir, Message: fmt.Sprintf(
			"no tools_dir is configured, so there is nowhere to write the tool: set tools_dir in %s to the folder of tool files, and reload", cfg.File)}
	}
	dir := filepath.Clean(cfg.ToolsDir)
	target, created := filepath.Join(dir, name+".toml"), true
	if def, ok := findToolFile(dir, name); ok {
		target, created = def.File, false
	} else if other := toolOfFile(target); other != "" {
		return api.ToolWritten{}, &api.ToolFileError{Code: wire.CodeNotEditable, Message: fmt.Sprintf(
			"the file %s holds the tool %q, and a tool file holds one tool: rename that file, or give this tool another name", target, other)}
	}
	if why := notWritable(target); why != "" {
		return api.ToolWritten{}, &api.ToolFileError{Code: wire.CodeNotEditable, Message: why}
	}
	if filepath.Dir(target) != dir {
		return api.ToolWritten{}, &api.ToolFileError{Code: wire.CodeNotEditable, Message: fmt.Sprintf("%s is not a file of the tools folder %s", target, dir)}
	}
	if err := writeAtomically(target, data, f.h.log.Warn); err != nil {
		return api.ToolWritten{}, err
	}
	problems := f.reload(ctx)
	done := api.ToolWritten{File: target, Created: created}
	if _, served := f.h.registry.Get(name); !served {
		for _, p := range problems {
			if p.File == target {
				done.Problems = append(done.Problems, p)
			}
		}
		if len(done.Problems) == 0 {
			done.Problems = config.Errors{{File: target, Message: "the tool was written but is not served; the host's log says why"}}
		}
	}
	return done, nil
}

// Remove removes the file of the tool called name, then loads the tools
// again.
func (f *toolFiles) Remove(ctx context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	cfg := f.h.config()
	if def, ok := inConfig(cfg, name); ok {
		return &api.ToolFileError{Code: wire.CodeNotEditable, Message: notInToolsDir(def)}
	}
	def, ok := findToolFile(cfg.ToolsDir, name)
	if cfg.ToolsDir == "" || !ok {
		return &api.ToolFileError{Code: wire.CodeUnknownTool, Message: fmt.Sprintf("no tool named %q is defined (in tools_dir or the main config)", name)}
	}
	if why := notWritable(def.File); why != "" {
		return &api.ToolFileError{Code: wire.CodeNotEditable, Message: why}
	}
	if err := os.Remove(def.File); err != nil {
		return fmt.Errorf("removing %s: %w", def.File, err)
	}
	if err := syncDir(filepath.Dir(def.File)); err != nil {
		f.h.log.Warn("the tools folder could not be synced after a removal", "file", def.File, "error", err)
	}
	f.reload(ctx)
	return nil
}

// reload loads the tools again, as a reload does, to its end even if the
// request that asked for it goes away (a load cut short would leave tools
// out).
func (f *toolFiles) reload(ctx context.Context) config.Errors {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	return f.h.loadTools(ctx)
}

// inConfig finds a [[tool]] table of the main config.
func inConfig(cfg *config.Config, name string) (config.Tool, bool) {
	for _, t := range cfg.Tools {
		if t.Name == name {
			return t, true
		}
	}
	return config.Tool{}, false
}

func notInToolsDir(def config.Tool) string {
	return fmt.Sprintf("the tool %s is defined in the main config at %s, which the API does not change: change it there and reload, or move it to a file of tools_dir", def.Name, def.Source)
}

// findToolFile finds the file of tools_dir that defines the tool called
// name, as the loader reads them (the first, if two do).
func findToolFile(dir, name string) (config.Tool, bool) {
	if dir == "" {
		return config.Tool{}, false
	}
	defs, _ := config.LoadTools(dir)
	for _, def := range defs {
		if def.Name == name {
			return def, true
		}
	}
	return config.Tool{}, false
}

// toolOfFile is the name of the tool file holds, or "" when it holds none
// (it does not exist, or is not a tool).
func toolOfFile(file string) string {
	data, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	def, err := config.ParseTool(file, data)
	if err != nil {
		return ""
	}
	return def.Name
}

// notWritable says why the API does not replace or remove file, or "" when
// it may (or the file does not exist). A symbolic link is never written
// through nor removed: it may point anywhere, and the admin who made it
// meant it.
func notWritable(file string) string {
	st, err := os.Lstat(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return ""
	case err != nil:
		return fmt.Sprintf("the tool file %s can't be looked at: %v", file, err)
	case st.Mode()&fs.ModeSymlink != 0:
		to, _ := os.Readlink(file)
		return fmt.Sprintf("the tool file %s is a symbolic link to %s, and the API does not change links or write through them: edit the file it points to by hand and reload, or replace the link with a file of its own", file, to)
	case !st.Mode().IsRegular():
		return fmt.Sprintf("%s is not a regular file; the API only replaces tool files", file)
	}
	return ""
}

// writeAtomically writes data as file: to a temporary file of the same
// folder (".<name>.tmp-<random>", never read as a tool), mode 0644 and
// owned as the folder is, synced, renamed over file, and the folder synced.
// The rename replaces the folder's entry, never what it pointed to.
func writeAtomically(file string, data []byte, warn func(msg string, args ...any)) (err error) {
	dir := filepath.Dir(file)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(file)+".tmp-*")
	if err != nil {
		return fmt.Errorf("can't write in the tools folder %s: %w", dir, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	if err = tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("setting the mode of %s: %w", tmp.Name(), err)
	}
	ownLikeFolder(tmp, dir, warn)
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	if err = os.Rename(tmp.Name(), file); err != nil {
		return fmt.Errorf("putting the tool file in place: %w", err)
	}
	if serr := syncDir(dir); serr != nil {
		warn("the tools folder could not be synced after a write", "file", file, "error", serr)
	}
	return nil
}

// ownLikeFolder gives f the folder's owner and group when it can: as root
// it can; a host running as a user of the folder's group keeps its own
// user, with the folder's group.
func ownLikeFolder(f *os.File, dir string, warn func(msg string, args ...any)) {
	ds, err := os.Stat(dir)
	if err != nil {
		return
	}
	fst, err := f.Stat()
	if err != nil {
		return
	}
	d, ok1 := ds.Sys().(*syscall.Stat_t)
	o, ok2 := fst.Sys().(*syscall.Stat_t)
	if !ok1 || !ok2 || (d.Uid == o.Uid && d.Gid == o.Gid) {
		return
	}
	if err := f.Chown(int(d.Uid), int(d.Gid)); err == nil {
		return
	}
	if d.Gid != o.Gid {
		if err := f.Chown(-1, int(d.Gid)); err != nil {
			warn("a tool file keeps the host's group, not the tools folder's", "folder", dir, "error", err)
		}
	}
}

// syncDir makes a rename or removal in dir last.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
