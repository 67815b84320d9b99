package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolhost/toolhost/runsc/sandbox"
)

// A session's sandbox that stops while idle (or for another run's place, or because the
// manager closes) is checkpointed first, when it can be: its processes and their memory — the
// live interpreter and its names — are saved beside the session's disk, and the session's next
// run restores them instead of starting a new sandbox. A checkpoint is used once: it is removed
// when restored, when it can't be, and with the session.
//
// Only sandboxes of network off are checkpointed (the others' network is made for each sandbox,
// and a restore can't be given a new one), and only those in which a cell ran (there is
// nothing else to keep: a restore is then no faster than a start).
//
// A checkpoint holds the guest's memory, and runsc restore trusts what it reads, so:
//   - it lives in the session folder (which checkFolder trusts, 0700): its folder is 0700 and
//     its files 0600;
//   - its manifest (Dir/checkpoints/<id>.json, written last) holds the SHA-256 of each of its
//     files, the session it is of, and what it was made with: runsc's binary and the rootfs
//     (their identities, read again at each use: see identities) and the sandbox's memory limit. A checkpoint whose
//     files don't match, or that was made with another runsc, rootfs or memory limit, is not
//     restored;
//   - it is made only while the session folder keeps Options.KeepFreeMB free after it, counting
//     the sandbox's whole memory limit (a checkpoint is at most that: its pages, and runsc's
//     state of a few hundred KiB).
//
// A restore that fails — a checkpoint not valid as above, missing, or that runsc can't restore
// (gVisor's own checks, a file open at the checkpoint that is gone) — falls back to a new
// sandbox on the same files; the run's Message says why the names are gone.

// checkpointsDir is the folder of the checkpoints, in the session folder.
func (m *Manager) checkpointsDir() string { return filepath.Join(m.opts.Dir, "checkpoints") }

// checkpointPath is the folder of the checkpoint of session id (runsc's files).
func (m *Manager) checkpointPath(id string) string { return filepath.Join(m.checkpointsDir(), id) }

// manifestPath is the manifest of session id's checkpoint.
func (m *Manager) manifestPath(id string) string {
	return filepath.Join(m.checkpointsDir(), id+".json")
}

// manifest describes a checkpoint: what it is of, what it was made with, and its files' hashes.
type manifest struct {
	Session     string            `json:"session"`
	Made        time.Time         `json:"made"`
	Runsc       string            `json:"runsc"`
	Rootfs      string            `json:"rootfs"`
	MemoryBytes int64             `json:"memory_bytes"`
	Files       map[string]string `json:"files"` // name -> SHA-256, hex
	Bytes       int64             `json:"bytes"`
}

// identities are what a checkpoint must have been made with to be restored: the runsc binary and
// the rootfs, read again at each use (an upgrade or a rebuild may replace either while the host
// runs).
type identities struct {
	runscPath, dir string
}

// get returns the identities of the runsc binary and of the rootfs the manager's sandboxes use.
// runsc's is its file's inode, size, and times of change and of modification: an upgrade
// replaces the file (another inode), and anything that writes to it changes its times, which
// user space can't set back (its change time). Hashing the 60 MB binary instead cost seconds of
// CPU on a slow machine, at the first idle stop of a busy host. The rootfs's is the SHA-256 of
// its stamp (the .toolhost-rootfs file toolhost rootfs writes, which changes with each build)
// and the size and time of its /usr/bin/python3, so that a rootfs made otherwise changes it too
// when rebuilt.
func (id identities) get() (runscID, rootfsID string, err error) {
	var st unix.Stat_t
	if err := unix.Stat(id.runscPath, &st); err != nil {
		return "", "", fmt.Errorf("reading runsc to know the checkpoints it can restore: %w", err)
	}
	runscID = fmt.Sprintf("inode %d, %d bytes, changed %d, modified %d", st.Ino, st.Size, st.Ctim.Nano(), st.Mtim.Nano())
	r := sha256.New()
	stamp, _ := os.ReadFile(filepath.Join(id.dir, ".toolhost-rootfs"))
	r.Write(stamp)
	if fi, err := os.Stat(filepath.Join(id.dir, "usr/bin/python3")); err == nil {
		fmt.Fprintf(r, "\x00%d\x00%d", fi.Size(), fi.ModTime().UnixNano())
	}
	return runscID, hex.EncodeToString(r.Sum(nil)), nil
}

// keep checkpoints s's sandbox before it is stopped, when it can be; a failure is logged (the
// session's next run then starts a new interpreter). s.mu is held.
func (m *Manager) keep(ctx context.Context, s *session) {
	if s.box == nil || !m.checkpointable(s, s.box) {
		return
	}
	t0 := time.Now()
	if err := m.checkpoint(ctx, s, s.box); err != nil {
		m.log.Warn("checkpointing a session's sandbox failed: its interpreter's names will be gone at its next run", "session", s.id, "error", err)
		return
	}
	m.log.Debug("checkpointed a session's sandbox", "session", s.id, "took", time.Since(t0))
	m.kickPrepared()
}

// checkpointable says whether s's sandbox b can be checkpointed now (see above). s.mu is held.
func (m *Manager) checkpointable(s *session, b *box) bool {
	return !m.opts.NoCheckpoints && !m.viaExec && b.agent != nil && b.net == NetworkOff && s.cells && s.active == 0 && !b.isEnded()
}

// checkpoint saves s's sandbox b to its checkpoint, replacing any it had; b has ended when it
// returns, and is for stopBox. s.mu is held.
func (m *Manager) checkpoint(ctx context.Context, s *session, b *box) error {
	m.removeCheckpoint(s.id)
	limit := b.sb.Options().Limits.MemoryBytes
	free, _, _, err := diskFree(m.opts.Dir)
	if err != nil {
		return fmt.Errorf("reading the free space of the session folder: %w", err)
	}
	if int64(free)-limit < int64(m.opts.KeepFreeMB)<<20 {
		return fmt.Errorf("the session folder %s has %s free, too little for a checkpoint of up to %s that keeps %d MiB free ([python] sessions_keep_free_mb)",
			m.opts.Dir, mib(int64(free)), mib(limit), m.opts.KeepFreeMB)
	}
	runscID, rootfsID, err := m.ids.get()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(m.checkpointsDir(), 0o700); err != nil {
		return fmt.Errorf("making the checkpoints' folder: %w", err)
	}
	if err := checkFolder(m.checkpointsDir()); err != nil {
		return err
	}
	tmp := m.checkpointPath(s.id) + ".new"
	_ = os.RemoveAll(tmp)
	b.mu.Lock()
	if b.why == "" {
		b.why = "the session's sandbox was checkpointed"
	}
	b.mu.Unlock()
	if err := b.sb.Checkpoint(ctx, tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	man := manifest{Session: s.id, Made: time.Now().UTC(), Runsc: runscID, Rootfs: rootfsID, MemoryBytes: limit}
	if man.Files, man.Bytes, err = hashFiles(tmp, nil); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(tmp, m.checkpointPath(s.id)); err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("keeping the checkpoint: %w", err)
	}
	// The manifest last: a checkpoint without one is none (a crash half-way leaves no trust).
	data, err := json.Marshal(man)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(m.manifestPath(s.id), data); err != nil {
		m.removeCheckpoint(s.id)
		return fmt.Errorf("keeping the checkpoint's manifest: %w", err)
	}
	return nil
}

// hashFiles returns the SHA-256 of each plain file of dir for which now is true (of every one
// when now is nil; the others are listed with an empty hash), and their total size; anything
// else there is an error.
func hashFiles(dir string, now func(name string) bool) (map[string]string, int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, fmt.Errorf("reading the checkpoint: %w", err)
	}
	files, total := map[string]string{}, int64(0)
	for _, e := range entries {
		if !e.Type().IsRegular() {
			return nil, 0, fmt.Errorf("the checkpoint holds %s, which is not a plain file", e.Name())
		}
		if now != nil && !now(e.Name()) {
			files[e.Name()] = ""
			continue
		}
		sum, n, err := hashFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, 0, err
		}
		files[e.Name()], total = sum, total+n
	}
	return files, total, nil
}

// hashFile returns the SHA-256 of the plain file at path (never through a symbolic link) and
// its size.
func hashFile(path string) (string, int64, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return "", 0, fmt.Errorf("reading the checkpoint's %s: %w", filepath.Base(path), err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("reading the checkpoint's %s: %w", filepath.Base(path), err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// writeFileAtomic writes data to path, 0600, through a new file renamed over it, and syncs both.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".new"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	syncDir(filepath.Dir(path))
	return nil
}

// errNoCheckpoint: the session has no checkpoint (the usual case: nothing is said).
var errNoCheckpoint = errors.New("the session has no checkpoint")

// guestMemory is the file of a checkpoint that holds the guest's memory pages (runsc's name for
// it), most of a checkpoint's bytes. gVisor's sentry doesn't trust what is in it (the guest
// writes its own memory), so a restore may read it before its hash is checked: its check runs
// beside the restore, and a restored sandbox whose pages are not what was written is removed
// before a run is given to it. The other files, the kernel's state that the sentry trusts, are
// checked before the restore.
const guestMemory = "pages.img"

// validCheckpoint checks session id's checkpoint against its manifest and what this manager
// runs with, and returns its folder, and what checks its guestMemory file (for the caller to
// run beside the restore, and heed). errNoCheckpoint when it has none; otherwise an error says,
// in the user's words, why it can't be restored.
func (m *Manager) validCheckpoint(id string) (dir string, checkMemory func() error, err error) {
	data, err := os.ReadFile(m.manifestPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil, errNoCheckpoint
	}
	if err != nil {
		return "", nil, fmt.Errorf("its checkpoint's manifest can't be read: %w", err)
	}
	var man manifest
	if err := json.Unmarshal(data, &man); err != nil {
		return "", nil, fmt.Errorf("its checkpoint's manifest is damaged: %w", err)
	}
	runscID, rootfsID, err := m.ids.get()
	switch {
	case err != nil:
		return "", nil, err
	case man.Session != id:
		return "", nil, errors.New("its checkpoint is another session's")
	case man.Runsc != runscID:
		return "", nil, errors.New("its checkpoint was made by another version of runsc (gVisor), which was upgraded since")
	case man.Rootfs != rootfsID:
		return "", nil, errors.New("its checkpoint was made on another root filesystem, which was rebuilt since")
	case man.MemoryBytes != m.opts.Limits.MemoryBytes:
		return "", nil, fmt.Errorf("its checkpoint was made with %s of memory, and sessions now have %s ([sessions] memory_mb)",
			mib(man.MemoryBytes), mib(m.opts.Limits.MemoryBytes))
	}
	dir = m.checkpointPath(id)
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return "", nil, errors.New("its checkpoint's files are missing")
	}
	files, _, err := hashFiles(dir, func(name string) bool { return name != guestMemory })
	if err != nil {
		return "", nil, fmt.Errorf("its checkpoint can't be read: %w", err)
	}
	if len(files) != len(man.Files) {
		return "", nil, fmt.Errorf("its checkpoint's files are not the ones it was made with (%d, not %d)", len(files), len(man.Files))
	}
	for _, n := range slices.Sorted(maps.Keys(man.Files)) {
		if sum, ok := files[n]; !ok || sum != man.Files[n] && sum != "" {
			return "", nil, fmt.Errorf("its checkpoint's %s is not what was written (damaged or changed since)", n)
		}
	}
	checkMemory = func() error {
		if _, ok := man.Files[guestMemory]; !ok {
			return nil
		}
		sum, _, err := hashFile(filepath.Join(dir, guestMemory))
		if err != nil {
			return fmt.Errorf("its checkpoint can't be read: %w", err)
		}
		if sum != man.Files[guestMemory] {
			return fmt.Errorf("its checkpoint's %s is not what was written (damaged or changed since)", guestMemory)
		}
		return nil
	}
	return dir, checkMemory, nil
}

// hasCheckpoint says whether session id has a checkpoint (valid or not).
func (m *Manager) hasCheckpoint(id string) bool {
	_, err := os.Lstat(m.manifestPath(id))
	return err == nil
}

// removeCheckpoint removes session id's checkpoint, if it has one; a failure is logged.
func (m *Manager) removeCheckpoint(id string) {
	for _, p := range []string{m.manifestPath(id), m.manifestPath(id) + ".new"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			m.log.Warn("removing a session's checkpoint", "session", id, "error", err)
		}
	}
	for _, p := range []string{m.checkpointPath(id), m.checkpointPath(id) + ".new"} {
		if err := os.RemoveAll(p); err != nil {
			m.log.Warn("removing a session's checkpoint", "session", id, "error", err)
		}
	}
}

// checkpointIDs returns the sessions that have something in the checkpoints' folder.
func (m *Manager) checkpointIDs() []string {
	entries, err := os.ReadDir(m.checkpointsDir())
	if err != nil {
		return nil
	}
	var ids []string
	for _, e := range entries {
		id, _, _ := strings.Cut(e.Name(), ".")
		if idRx.MatchString(id) && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// resume restores s's sandbox from its checkpoint, its place held for owner. It returns a nil
// box and errors when the session has no checkpoint. err is an error of the run (no place for
// the sandbox: the checkpoint is kept). failed says why the checkpoint couldn't be restored: it
// is removed, and the caller starts a new sandbox. s.mu is held.
func (m *Manager) resume(ctx context.Context, s *session, owner string) (b *box, failed, err error) {
	if !m.hasCheckpoint(s.id) {
		return nil, nil, nil
	}
	free, err := m.takePlace(ctx, owner)
	if err != nil {
		return nil, nil, err
	}
	b, failed = m.restore(ctx, s.id)
	m.removeCheckpoint(s.id)
	if failed != nil {
		free()
		return nil, failed, nil
	}
	m.hold(b, owner, free)
	return b, nil, nil
}

// restore checks session id's checkpoint and restores its sandbox, its workspace mounted: into
// the sandbox prepared for it if there is one (prepared.go), the whole way otherwise. The guest's
// memory is checked beside the restore (see guestMemory).
func (m *Manager) restore(ctx context.Context, id string) (*box, error) {
	t0 := time.Now()
	dir, checkMemory, err := m.validCheckpoint(id)
	checked := time.Since(t0)
	if errors.Is(err, errNoCheckpoint) {
		return nil, errors.New("its checkpoint is gone")
	}
	if err != nil {
		return nil, err
	}
	memory := make(chan error, 1)
	go func() { memory <- checkMemory() }()
	sb, prepared, err := m.restoreSandbox(ctx, id, dir)
	if merr := <-memory; merr != nil {
		// The better reason, whatever runsc said of such pages.
		if sb != nil {
			if err := sb.Destroy(context.WithoutCancel(ctx)); err != nil {
				m.log.Warn("removing a sandbox restored from a damaged checkpoint", "sandbox", sb.ID, "error", err)
			}
		}
		return nil, merr
	}
	if err != nil {
		return nil, err
	}
	m.log.Debug("restored a session's sandbox", "session", id, "check", checked, "restore", time.Since(t0)-checked, "prepared", prepared)
	m.opts.Counters.Resumed.Add(1)
	if prepared {
		m.opts.Counters.ResumedPrepared.Add(1)
	}
	return m.watch(id, sb, NetworkOff), nil
}

// restoreSandbox restores session id's sandbox from the checkpoint in dir: into the prepared
// sandbox (prepared is true) if there is one and that works, the whole way otherwise.
func (m *Manager) restoreSandbox(ctx context.Context, id, dir string) (sb *sandbox.Sandbox, prepared bool, err error) {
	if p := m.takePrepared(); p != nil {
		err := p.Resume(ctx, dir, m.mountPath(id))
		if err == nil {
			return p, true, nil
		}
		// The checkpoint or the prepared sandbox: a whole restore says which.
		m.log.Warn("restoring into the prepared sandbox failed: restoring the whole way", "session", id, "error", err)
		if err := p.Destroy(context.WithoutCancel(ctx)); err != nil {
			m.log.Warn("removing the sandbox prepared for resumes", "sandbox", p.ID, "error", err)
		}
	}
	sandboxes, opts, err := m.boxOptions(m.mountPath(id), NetworkOff)
	if err != nil {
		return nil, false, err
	}
	sb, err = sandboxes.Restore(ctx, opts, dir)
	if err != nil {
		return nil, false, restoreRefused(err)
	}
	return sb, false, nil
}

// restoreRefused says in the user's words why runsc didn't restore a checkpoint: the reasons a
// user can act on by name, runsc's own words otherwise.
func restoreRefused(err error) error {
	if gone := openFileGone.FindStringSubmatch(err.Error()); gone != nil {
		return fmt.Errorf("/work/%s, which its code had open when it stopped, is gone", gone[1])
	}
	if cpu := cpuFeaturesMissing.FindStringSubmatch(err.Error()); cpu != nil {
		return fmt.Errorf("it was checkpointed on a CPU with features this one lacks (%s): the machine changed, or its virtual CPU did",
			strings.Join(strings.Fields(strings.ReplaceAll(cpu[1], ":{}", "")), ", "))
	}
	return fmt.Errorf("runsc couldn't restore its checkpoint: %w", err)
}

// cpuFeaturesMissing is what runsc says of a checkpoint made on a CPU with features this one
// lacks (a checkpoint records the CPU features its processes were given).
var cpuFeaturesMissing = regexp.MustCompile(`incompatible FeatureSet: missing features: map\[([^\]]*)\]`)

// openFileGone is what runsc says of a file of /work that a process had open at the checkpoint
// and that was removed since (gVisor reopens such files by path).
var openFileGone = regexp.MustCompile(`failed to walk "([^"]+)" of type \d+ in mount "[^"]*:/work"`)
