// Package session runs conversation sandboxes: one LongLived gVisor sandbox per session while it
// is used, its files on a per-session ext4 image mounted at /work.
//
// A session is named by an opaque id (^s[0-9a-f]{24}$, made by the host). Its workspace is a
// sparse file Dir/<id>.img of DiskMB, formatted ext4 and loop-mounted (nosuid, nodev) at
// Dir/mnt/<id>: a size cap the kernel holds, which outlives every sandbox. The first Run of a
// session starts its sandbox (Result.Cold) with the mount as /work; each Run is a new process in
// it (runsc exec), its stdout and stderr streamed as they are printed; a run that takes too long
// is killed with its processes and the sandbox stays. A sandbox unused for IdleStop is stopped
// (files kept) — checkpointed first when its network is off, so that its next run restores it
// with the live interpreter's names (see checkpoint.go); a change of the session's network mode
// gives its next run a new sandbox on the same files. Files, ReadFile, WriteFile and RemoveFile reach the workspace from the host,
// confined to it with openat2 (no "..", no absolute paths, no symbolic links, no other mount).
//
// A host that restarts, or crashed, calls Reconcile with the sessions it keeps: sandboxes that
// processes now gone left running are removed (never those of a process still running, nor of
// another prefix), mounts are dropped to be made again when used, and the workspaces of sessions
// not kept are deleted. One Manager at a time uses a Dir (a lock file holds it).
package session
