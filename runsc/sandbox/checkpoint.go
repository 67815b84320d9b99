package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/toolhost/toolhost/runsc"
)

// Checkpoint saves the sandbox — its processes, their memory and open files — to the folder
// image (which must not exist yet; it is made 0700 and its files 0600) and stops it: the
// sandbox has ended when Checkpoint returns, whether it succeeded or not, and is for Destroy.
// Manager.Restore runs it again. Only a sandbox started with Options.ControlStdin can be
// restored with a control socket (see there). Files its processes keep open are reopened by
// path at the restore: a file removed meanwhile makes the restore fail.
func (s *Sandbox) Checkpoint(ctx context.Context, image string) error {
	if s.opts.Lifetime != LongLived || !s.opts.ControlStdin {
		return errors.New("only a long-lived sandbox whose control socket is its stdin can be checkpointed")
	}
	if err := os.Mkdir(image, 0o700); err != nil {
		return fmt.Errorf("making the checkpoint's folder: %w", err)
	}
	err := s.m.opts.Runtime.Checkpoint(ctx, s.ID, &runsc.CheckpointOpts{ImagePath: image,
		LogFile: filepath.Join(s.dir, "checkpoint.log")})
	if err != nil {
		return fmt.Errorf("checkpointing sandbox %s: %w", s.ID, err)
	}
	// runsc writes its files as the umask lets it: they hold the guest's memory.
	entries, err := os.ReadDir(image)
	if err != nil {
		return fmt.Errorf("reading the checkpoint's folder: %w", err)
	}
	for _, e := range entries {
		if err := os.Chmod(filepath.Join(image, e.Name()), 0o600); err != nil {
			return fmt.Errorf("making the checkpoint's files private: %w", err)
		}
	}
	return nil
}

// Restore makes a sandbox with opts (as Start does) from the checkpoint that Checkpoint wrote
// to the folder image, and runs it from where the checkpoint left it, with a new control
// socket as its first process's stdin (opts.ControlStdin is required) and new stdout and
// stderr pipes. opts must be the checkpointed sandbox's (its rootfs, mounts and limits), but
// for the workspace's host folder, which may have moved; Options.Ready is not waited for (the
// first process said it once, before the checkpoint). The restored sandbox has a new ID. The
// checkpoint's files may be removed once Restore returned.
func (m *Manager) Restore(ctx context.Context, opts Options, image string) (*Sandbox, error) {
	if opts.Lifetime != LongLived || !opts.ControlStdin {
		return nil, errors.New("only a long-lived sandbox whose control socket is its stdin can be restored")
	}
	return m.start(ctx, opts, image)
}
