package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

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
	return m.start(ctx, opts, launch{image: image})
}

// Prepare makes a sandbox with opts that runs nothing yet, for Resume to restore a checkpoint
// into: runsc has created it (its sandbox and gofer processes are up, its cgroup and limits
// set, its control socket and pipes in place), which is most of a restore's work, done ahead.
// Its /work is an empty mount point that Resume binds the workspace onto. opts are as
// Restore's, but with no Workspace (Resume gives it). Destroy removes a sandbox never resumed.
func (m *Manager) Prepare(ctx context.Context, opts Options) (*Sandbox, error) {
	if opts.Lifetime != LongLived || !opts.ControlStdin {
		return nil, errors.New("only a long-lived sandbox whose control socket is its stdin can be prepared for a restore")
	}
	if opts.Workspace != "" {
		return nil, errors.New("a prepared sandbox gets its workspace when it is resumed")
	}
	return m.start(ctx, opts, launch{prepare: true})
}

// Resume restores the checkpoint in the folder image into s, a sandbox Prepare made, with the
// host folder workspace as its /work (bound onto its mount point, from where the mount reaches
// the sandbox's gofer), and runs it from where the checkpoint left it: Restore's work without
// the part Prepare did. The checkpoint must be of a sandbox with s's options and a workspace.
// A sandbox prepared with few CPU shares (so that its making yields to running code) gets a
// running sandbox's. A sandbox is resumed once; on failure it is for Destroy.
func (s *Sandbox) Resume(ctx context.Context, image, workspace string) error {
	if !s.prepared {
		return errors.New("only a prepared sandbox can be resumed")
	}
	s.prepared = false
	if err := unix.Mount(workspace, s.workDir(), "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("binding the workspace %s into the prepared sandbox: %w", workspace, err)
	}
	err := s.m.opts.Runtime.Restore(ctx, s.ID, filepath.Join(s.dir, "bundle"), &runsc.RestoreOpts{ImagePath: image, Detach: true,
		CreateOpts: runsc.CreateOpts{LogFile: filepath.Join(s.dir, "runsc.log")}})
	if err != nil {
		return fmt.Errorf("restoring the sandbox: %w", err)
	}
	s.opts.Workspace = workspace
	s.started = time.Now()
	return s.giveFullShares()
}
