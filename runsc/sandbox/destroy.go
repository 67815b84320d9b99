package sandbox

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/toolhost/toolhost/runsc"
)

// destroyFast removes a one-container sandbox without runsc: it kills every process of the
// sandbox's cgroup (the sandbox, its gofer and its systrap stubs all live there), waits until
// none is left, and removes runsc's state files of the id (<id>_sandbox:<id>.state and .lock,
// runsc-<id>.sock). It reports whether that worked; if not, the caller runs runsc delete.
func destroyFast(ctx context.Context, rt *runsc.Runtime, cg *Cgroups, id string) bool {
	if _, ok := cg.Empty(id); !ok {
		return false
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		cg.Kill(id)
		empty, ok := cg.Empty(id)
		if !ok {
			return false
		}
		if empty {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	root := rt.Options().Root
	files, err := filepath.Glob(filepath.Join(root, id+"_sandbox:*"))
	if err != nil {
		return false
	}
	files = append(files, filepath.Join(root, "runsc-"+id+".sock"))
	for _, f := range files {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false
		}
	}
	return true
}
