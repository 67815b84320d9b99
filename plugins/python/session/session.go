package session

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/pathtrust"
	"github.com/toolhost/toolhost/runsc/sandbox"
	"github.com/toolhost/toolhost/sdk/errcode"
)

// Network is a session's network mode.
type Network string

// The network modes of a session.
const (
	// NetworkOff: loopback only (the default).
	NetworkOff Network = config.SessionNetworkOff
	// NetworkWeb: public addresses on ports 80 and 443, as a python tool with network = true.
	NetworkWeb Network = config.SessionNetworkWeb
	// NetworkPackages: the egress proxy at Options.ProxyAddr and nothing else.
	NetworkPackages Network = config.SessionNetworkPackages
)

// Defaults of Options and Run. Those of a session's disk, memory, idle stop and run time are
// [sessions]' own, from config: the python kind passes the host's values, and a 0 left here
// means the same as a [sessions] that leaves the key out.
const (
	DefaultDiskMB   = config.SessionDiskMBDefault
	DefaultIdleStop = config.SessionIdleMinutesDefault * time.Minute
	// DefaultMemoryBytes is a sandbox's memory when Limits.MemoryBytes is 0.
	DefaultMemoryBytes = config.SessionMemoryMBDefault << 20
	// DefaultTimeout is a run's time when Run.Timeout is 0.
	DefaultTimeout = config.SessionSecondsDefault * time.Second
	// DefaultPlaceWait is how long a run waits for a sandbox place when all are taken.
	DefaultPlaceWait = 10 * time.Second
	// DefaultKeepFreeMB is the room session disks leave free on their filesystem.
	DefaultKeepFreeMB = 1024
	// minDiskMB is the smallest workspace: ext4 and its metadata need some room.
	minDiskMB = 4
)

// sandboxUID is the user (and group) the code runs as and owns the workspace's files.
const sandboxUID = 65534

// Options configure a Manager.
type Options struct {
	// Sandboxes makes the sandboxes (the python kind's manager: runsc, rootfs, state, prefix).
	Sandboxes *sandbox.Manager
	// Dir holds the workspaces: Dir/<id>.img and their mounts at Dir/mnt/<id>; made 0700.
	Dir string
	// DiskMB is the size of a new workspace image (DefaultDiskMB when 0). An image made smaller
	// grows to it when next mounted; one made larger stays as it is.
	DiskMB int
	// Limits are each sandbox's: memory (gVisor's own included), pids, CPU. DefaultMemoryBytes,
	// 512 pids, one CPU and 1024 open files when left 0.
	Limits sandbox.Limits
	// IdleStop: a sandbox unused this long is stopped, its files kept (DefaultIdleStop when 0).
	IdleStop time.Duration
	// ProxyAddr is the egress proxy a NetworkPackages sandbox may reach, and nothing else.
	ProxyAddr netip.AddrPort
	// Places, if not nil, bound the sandboxes of this manager together with those of the others
	// that share them (the python kind's pool): each live session sandbox holds one. A run that
	// needs a sandbox when all are taken stops the session sandbox unused longest that no run or
	// file operation uses (its files stay), else waits up to PlaceWait for a place, else fails
	// with errcode.TooManySandboxes. Nil: no bound.
	Places *sandbox.Places
	// PlacesSetting names where Places' number is set, for the error (default "[python.pool] max").
	PlacesSetting string
	// PlaceWait is how long a run waits for a place (DefaultPlaceWait when 0).
	PlaceWait time.Duration
	// Counters, if not nil, count what the caps did (shared by the managers that replace one
	// another, so that they outlive a reconfigure); nil: the manager counts in its own.
	Counters *Counters
	// KeepFreeMB is the room on Dir's filesystem that session disks never take: a disk is made,
	// or grown, only when the filesystem keeps this much free after it (DefaultKeepFreeMB when
	// 0, none when negative).
	KeepFreeMB int
	// Ready is how many sandboxes are kept started ahead for new sessions (see spare.go): a new
	// session's first run of network off takes one, its interpreter already started, instead of
	// making a disk and starting a sandbox. Each holds a blank disk of DiskMB and a sandbox's
	// memory. 0: none.
	Ready int
	// NoCheckpoints stops idle sandboxes without a checkpoint (see checkpoint.go): their
	// interpreters' names are gone at the next run.
	NoCheckpoints bool
	// Log hears what the Manager does on its own (idle stops, failures to clean up).
	Log hclog.Logger
}

// Counters count what the caps did, for metrics. They are safe for concurrent use.
type Counters struct {
	// StoppedForRoom counts idle session sandboxes stopped because another run needed a place.
	StoppedForRoom atomic.Uint64
	// NoPlace counts runs refused with errcode.TooManySandboxes.
	NoPlace atomic.Uint64
	// NoRoom counts disks refused (made or grown) for lack of room in Dir: errcode.DiskFull.
	NoRoom atomic.Uint64
	// ReadyTaken counts new sessions whose first run took a ready sandbox (Options.Ready).
	ReadyTaken atomic.Uint64
	// Resumed counts sandboxes restored from their checkpoints; ResumedPrepared those of them
	// restored into a sandbox prepared ahead (prepared.go).
	Resumed, ResumedPrepared atomic.Uint64
}

// Run is one run of code in a session.
type Run struct {
	// Language is "python" (the code is a Python program) or "bash" (a bash script).
	Language string
	// Code is the program or the script.
	Code string
	// Timeout is the run's time (DefaultTimeout when 0); past it, its processes are killed and
	// the session's sandbox stays.
	Timeout time.Duration
	// Network is the session's mode; a change gives this run a new sandbox on the same files.
	Network Network
	// ProxyURL (NetworkPackages) is http://USER:PASS@ADDR, set as HTTP(S)_PROXY and
	// http(s)_proxy, which pip and npm read.
	ProxyURL string
	// Owner names whom the run is for (its principal): a sandbox the run starts takes its place in
	// Options.Places for that owner (see sandbox.Places).
	Owner string
	// Reset (python) starts the session's interpreter afresh before the code runs: the variables
	// of earlier runs are gone, the files stay.
	Reset bool
	// Stdout and Stderr receive what the code prints, as it prints it (nil: discarded). They are
	// called from other goroutines, one call at a time per stream; the slice is theirs to keep.
	Stdout, Stderr func([]byte)
	// Display (python) receives each image the code shows (a matplotlib figure, display(img)),
	// in order with what it prints: its MIME type ("image/png" or "image/jpeg") and bytes, at
	// most 4 MiB. Called like Stdout; nil: discarded.
	Display func(mimeType string, data []byte)
}

// Result is how a run ended.
type Result struct {
	// ExitCode is the process's exit status (-1 when it has none).
	ExitCode int
	// Stopped is "" when the code ran to its end, or why it was stopped: "timeout", "memory",
	// "pids" or "disk".
	Stopped string
	// Message says why, in the user's words, when Stopped is not "".
	Message string
	// Took is how long the process ran.
	Took time.Duration
	// Cold says a new sandbox was started for this run.
	Cold bool
	// Value (python) is repr() of the value of the code's last statement, when that is an
	// expression whose value isn't None, as a notebook shows it; "" otherwise.
	Value string
	// Resumed says the session's sandbox was restored from the checkpoint made when it stopped
	// (idle, for another run's place, or a restart): its interpreter's names are as they were.
	Resumed bool
	// Restarted (python) says the interpreter ended during the run (it was stopped, or the code
	// ended it): the variables of earlier runs are gone, and the next run starts a new one.
	Restarted bool
}

// File is a file or folder of a workspace.
type File struct {
	// Path is relative to /work, with "/" between its parts.
	Path    string
	Size    int64
	ModTime time.Time
	Dir     bool
}

// Manager keeps the sessions of one Dir. Its methods are safe for concurrent use.
type Manager struct {
	opts  Options
	log   hclog.Logger
	tools tools
	lock  *os.File // the flock on Dir/.lock, nil once closed

	mu       sync.Mutex
	sessions map[string]*session
	closed   bool

	stopIdle chan struct{}
	idleDone chan struct{}

	// packages makes the NetworkPackages sandboxes: their only destination is ProxyAddr.
	packages *sandbox.Manager

	// viaExec runs each process with runsc exec instead of the sandbox's agent (measurements).
	viaExec bool

	// unreclaim unregisters the manager's reclaimer from Options.Places (nil without them).
	unreclaim func()
	// diskMu makes one image (or its growth) at a time, so each sees the room the last one left.
	diskMu sync.Mutex
	// spare holds the ready sandboxes for new sessions (Options.Ready).
	spare spares
	// prep holds the sandbox prepared for the next resume (prepared.go).
	prep prepared
	// ids are what checkpoints are made with (see checkpoint.go).
	ids identities
}

// session is what the Manager holds of one session. mu is held across its transitions (mount,
// sandbox start and stop), never while a run's process runs.
type session struct {
	id string

	mu       sync.Mutex
	deleted  bool // Delete ran: the entry is no longer in the map, or is about to leave it
	mounted  bool
	box      *box
	active   int // runs and file operations in progress
	lastUsed time.Time
	cell     chan struct{} // held by the run_python cell that runs: one at a time (cellSlot)
	// cells says a sandbox of the session ran a cell: a new sandbox's interpreter then tells the
	// code that the names of before are gone.
	cells bool
}

// cellSlot returns s's slot of the interpreter: a run holds it (a send) while its cell runs.
func (s *session) cellSlot() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cell == nil {
		s.cell = make(chan struct{}, 1)
	}
	return s.cell
}

var idRx = regexp.MustCompile(`^s[0-9a-f]{24}$`)

// checkID says whether id is a session id of the host's making.
func checkID(id string) error {
	if !idRx.MatchString(id) {
		return errcode.Errorf(errcode.BadArgs, "%q is not a session id (s and 24 hex digits)", id)
	}
	return nil
}

// New checks the options, makes Dir and takes its lock, and starts the idle stop.
func New(opts Options) (*Manager, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	t, err := findTools()
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("the session folder %s: %w", opts.Dir, err)
	}
	opts.Dir = dir
	if err := makeFolders(dir); err != nil {
		return nil, err
	}
	lock, err := lockFolder(dir)
	if err != nil {
		return nil, err
	}
	m := &Manager{opts: opts, log: opts.Log, tools: t, lock: lock, sessions: map[string]*session{},
		stopIdle: make(chan struct{}), idleDone: make(chan struct{}),
		ids: identities{runscPath: opts.Sandboxes.Runtime().Options().Binary, dir: opts.Sandboxes.Rootfs()}}
	if opts.ProxyAddr.IsValid() {
		net := opts.Sandboxes.NetworkOptions()
		m.packages = opts.Sandboxes.WithNetwork(sandbox.NetworkOptions{MaxConnections: net.MaxConnections, OnlyTo: opts.ProxyAddr})
	}
	if opts.Places != nil {
		m.unreclaim = opts.Places.OnFull(m.reclaim)
	}
	go m.idleLoop()
	m.startSpares()
	m.startPrepared()
	return m, nil
}

// withDefaults checks the options a manager can't do without and fills in the defaults of those
// left out.
func (opts Options) withDefaults() (Options, error) {
	if opts.Sandboxes == nil {
		return opts, errors.New("the session manager needs a sandbox manager")
	}
	if opts.Dir == "" {
		return opts, errors.New("the session manager needs a folder for the workspaces")
	}
	if opts.DiskMB == 0 {
		opts.DiskMB = DefaultDiskMB
	}
	if opts.DiskMB < minDiskMB {
		return opts, fmt.Errorf("a session's disk of %d MiB is too small: give at least %d MiB", opts.DiskMB, minDiskMB)
	}
	if opts.IdleStop <= 0 {
		opts.IdleStop = DefaultIdleStop
	}
	if opts.PlaceWait <= 0 {
		opts.PlaceWait = DefaultPlaceWait
	}
	if opts.PlacesSetting == "" {
		opts.PlacesSetting = "[python.pool] max"
	}
	if opts.Counters == nil {
		opts.Counters = &Counters{}
	}
	if opts.KeepFreeMB == 0 {
		opts.KeepFreeMB = DefaultKeepFreeMB
	}
	opts.KeepFreeMB = max(opts.KeepFreeMB, 0)
	if opts.Limits.MemoryBytes <= 0 {
		opts.Limits.MemoryBytes = DefaultMemoryBytes
	}
	if opts.Limits.Pids <= 0 {
		opts.Limits.Pids = 512
	}
	if opts.Limits.CPUs <= 0 {
		opts.Limits.CPUs = 1
	}
	if opts.Limits.OpenFiles == 0 {
		opts.Limits.OpenFiles = 1024
	}
	if opts.Log == nil {
		opts.Log = hclog.NewNullLogger()
	}
	return opts, nil
}

// makeFolders makes the session folder dir and its mnt, each checked and private to this user.
func makeFolders(dir string) error {
	for _, d := range []string{dir, filepath.Join(dir, "mnt")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("making the session folder: %w", err)
		}
		if err := checkFolder(d); err != nil {
			return err
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return fmt.Errorf("making the session folder private: %w", err)
		}
	}
	return nil
}

// lockFolder takes the session folder dir for this process, which holds the file it returns
// open as long as it uses the folder: another process that has it is refused.
func lockFolder(dir string) (*os.File, error) {
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the session folder's lock: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("the session folder %s is in use by another toolhost process: give each its own", dir)
		}
		return nil, fmt.Errorf("locking the session folder: %w", err)
	}
	return lock, nil
}

// sessionsDirRisk is what a user who could change the session folder could do.
const sessionsDirRisk = "swap a session's disk for a link to any file, which toolhost opens, grows and mounts as root"

// checkFolder refuses a session folder (or its mnt folder) that is a symbolic link, or that
// anyone but root and the user toolhost runs as could change (pathtrust.Check: owner, mode and
// every folder above).
func checkFolder(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("the session folder %s can't be read: %w", dir, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("the session folder %s is a symbolic link: name the folder it points to ([python] sessions_dir)", dir)
	}
	if !fi.IsDir() {
		return fmt.Errorf("the session folder %s is not a folder ([python] sessions_dir)", dir)
	}
	return pathtrust.Check(dir, "the session folder", sessionsDirRisk)
}

// errClosed is what every method returns once Close ran.
var errClosed = errors.New("the session manager is closed")

// session returns the entry of id, making it if there is none.
func (m *Manager) session(id string) (*session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errClosed
	}
	s := m.sessions[id]
	if s == nil {
		s = &session{id: id, lastUsed: time.Now()}
		m.sessions[id] = s
	}
	return s, nil
}

// lockSession returns the entry of id locked, or an error when the manager is closed or the
// session was deleted meanwhile.
func (m *Manager) lockSession(id string) (*session, error) {
	s, err := m.session(id)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.deleted {
		s.mu.Unlock()
		return nil, errcode.New(errcode.NotFound, "the session was deleted meanwhile")
	}
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		s.mu.Unlock()
		return nil, errClosed
	}
	return s, nil
}

// Stop stops the session's sandbox, killing what runs in it, and removes its checkpoint if it
// has one; its files stay, and its next run starts a new sandbox and interpreter.
func (m *Manager) Stop(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	m.mu.Lock()
	s := m.sessions[id]
	m.mu.Unlock()
	if s == nil {
		m.removeCheckpoint(id)
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m.removeCheckpoint(id)
	return m.idle(ctx, s, "the session's sandbox was stopped", false)
}

// idle stops s's sandbox and, with no file operation in progress, unmounts its workspace. With
// keep, the sandbox is checkpointed first when it can be (see checkpoint.go). s.mu is held.
func (m *Manager) idle(ctx context.Context, s *session, why string, keep bool) error {
	var errs []error
	if s.box != nil {
		if keep {
			m.keep(ctx, s)
		}
		errs = append(errs, m.stopBox(ctx, s.box, why))
		s.box = nil
	}
	if s.mounted && s.active == 0 {
		if err := m.unmount(s.id); err != nil {
			errs = append(errs, err)
		} else {
			s.mounted = false
		}
	}
	return errors.Join(errs...)
}

// Delete removes the session: its sandbox (killing what runs in it), its mount and its image.
// A session that has none of these is not an error.
func (m *Manager) Delete(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	return m.remove(ctx, id, "the session was deleted")
}

// remove deletes every trace of the session id (see Delete).
func (m *Manager) remove(ctx context.Context, id, why string) error {
	s, err := m.session(id)
	if errors.Is(err, errClosed) {
		// Closed: nothing of the session is live any more; its files still go.
		s = &session{id: id}
	} else if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deleted = true
	var errs []error
	if s.box != nil {
		errs = append(errs, m.stopBox(ctx, s.box, why))
		s.box = nil
	}
	m.removeCheckpoint(id)
	if err := m.unmount(id); err != nil {
		errs = append(errs, err)
	}
	s.mounted = false
	if err := m.removeImage(id); err != nil {
		errs = append(errs, err)
	}
	m.mu.Lock()
	if m.sessions[id] == s {
		delete(m.sessions, id)
	}
	m.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("deleting session %s: %w", id, err)
	}
	return nil
}

// Reconcile makes what is on the host agree with the sessions the caller keeps, at start (after
// a restart or a crash): the sandboxes of this manager's prefix that processes now gone left are
// removed (never those of a process still running, nor of another prefix); workspaces of kept
// sessions stay, their mounts dropped to be made again when used; sessions not kept are deleted
// with their sandbox, mount and image. It returns the ids it deleted.
func (m *Manager) Reconcile(ctx context.Context, keep map[string]bool) (removed []string, err error) {
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return nil, errClosed
	}
	var errs []error
	if err := m.opts.Sandboxes.SweepGone(ctx); err != nil {
		errs = append(errs, fmt.Errorf("removing the sandboxes of processes that are gone: %w", err))
	}
	ids, spares := map[string]bool{}, map[string]bool{}
	entries, err := os.ReadDir(m.opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("reading the session folder: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, sparePrefix):
			// A ready sandbox's disk (or one being made): sweepSpares judges it.
			spare, _, _ := strings.Cut(name, ".")
			spares[spare] = true
		case strings.HasSuffix(name, ".img") && idRx.MatchString(strings.TrimSuffix(name, ".img")):
			ids[strings.TrimSuffix(name, ".img")] = true
		case strings.HasSuffix(name, ".img.new"):
			// An image whose making was cut short.
			if err := os.Remove(filepath.Join(m.opts.Dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	mounts, err := os.ReadDir(filepath.Join(m.opts.Dir, "mnt"))
	if err != nil {
		return nil, fmt.Errorf("reading the session folder: %w", err)
	}
	for _, e := range mounts {
		if idRx.MatchString(e.Name()) {
			ids[e.Name()] = true
		} else if strings.HasPrefix(e.Name(), sparePrefix) {
			spares[e.Name()] = true
		}
	}
	if err := m.sweepSpares(spares); err != nil {
		errs = append(errs, fmt.Errorf("removing the ready sandboxes of processes that are gone: %w", err))
	}
	for _, id := range m.checkpointIDs() {
		ids[id] = true
	}
	m.mu.Lock()
	for id := range m.sessions {
		ids[id] = true
	}
	m.mu.Unlock()
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for id := range ids {
			if !yield(id) {
				return
			}
		}
	}) {
		if keep[id] {
			if err := m.settle(ctx, id); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if err := m.remove(ctx, id, "the session is no longer kept"); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, id)
	}
	// Loop devices of this folder's images that no mount holds (a mount cut short).
	if err := m.detachLoops(func(string) bool { return true }); err != nil {
		errs = append(errs, err)
	}
	return removed, errors.Join(errs...)
}

// settle readies a kept session after a restart: a mount no live sandbox of this manager uses
// (an earlier process's) is dropped, to be made again when the session is used.
func (m *Manager) settle(ctx context.Context, id string) error {
	s, err := m.lockSession(id)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if s.box != nil || s.active > 0 {
		return nil
	}
	if err := m.unmount(id); err != nil {
		return err
	}
	s.mounted = false
	_ = os.Remove(m.mountPath(id))
	// A checkpoint whose making was cut short.
	_ = os.RemoveAll(m.checkpointPath(id) + ".new")
	_ = os.Remove(m.manifestPath(id) + ".new")
	return ctx.Err()
}

// Close stops every sandbox (killing what runs in them) and unmounts every workspace; the files
// stay. The Manager is of no use afterwards.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	if m.unreclaim != nil {
		m.unreclaim()
	}
	all := make([]*session, 0, len(m.sessions))
	for _, s := range m.sessions {
		all = append(all, s)
	}
	m.mu.Unlock()
	close(m.stopIdle)
	<-m.idleDone
	m.closeSpares(ctx)
	m.closePrepared(ctx)
	var (
		wg   sync.WaitGroup
		emu  sync.Mutex
		errs []error
	)
	for _, s := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.mu.Lock()
			defer s.mu.Unlock()
			var err error
			if s.box != nil {
				m.keep(ctx, s)
				err = m.stopBox(ctx, s.box, "the sandboxes are shutting down")
				s.box = nil
			}
			if s.mounted {
				err = errors.Join(err, m.unmount(s.id))
				s.mounted = false
			}
			if err != nil {
				emu.Lock()
				errs = append(errs, err)
				emu.Unlock()
			}
		}()
	}
	wg.Wait()
	if m.packages != nil {
		if err := m.packages.Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	m.mu.Lock()
	if m.lock != nil {
		m.lock.Close()
		m.lock = nil
	}
	m.mu.Unlock()
	return errors.Join(errs...)
}

// idleLoop stops the sandboxes (and drops the mounts) of sessions unused for IdleStop, until
// Close.
func (m *Manager) idleLoop() {
	defer close(m.idleDone)
	every := min(max(m.opts.IdleStop/4, 50*time.Millisecond), 30*time.Second)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-m.stopIdle:
			return
		case <-tick.C:
		}
		m.mu.Lock()
		all := make([]*session, 0, len(m.sessions))
		for _, s := range m.sessions {
			all = append(all, s)
		}
		m.mu.Unlock()
		for _, s := range all {
			if !s.mu.TryLock() {
				continue // starting, stopping or being deleted: not idle
			}
			if !s.deleted && s.active == 0 && (s.box != nil || s.mounted) && time.Since(s.lastUsed) >= m.opts.IdleStop {
				hadBox := s.box != nil
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				if err := m.idle(ctx, s, "the session's sandbox was idle", true); err != nil {
					m.log.Warn("stopping an idle session's sandbox", "session", s.id, "error", err)
				} else if hadBox {
					m.log.Debug("stopped an idle session's sandbox", "session", s.id)
				}
				cancel()
			}
			s.mu.Unlock()
		}
	}
}

// reclaim stops the sandbox of the session unused longest that no run or file operation uses,
// for Options.Places when every place is taken: its place is given back, its files stay and its
// next run starts a new sandbox. It reports whether it stopped one. It never waits for a
// session's lock (the caller of Places.Take may hold one).
func (m *Manager) reclaim(ctx context.Context) bool {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return false
	}
	all := make([]*session, 0, len(m.sessions))
	for _, s := range m.sessions {
		all = append(all, s)
	}
	m.mu.Unlock()
	type cand struct {
		s    *session
		last time.Time
	}
	var cands []cand
	for _, s := range all {
		if !s.mu.TryLock() {
			continue
		}
		if !s.deleted && s.active == 0 && s.box != nil {
			cands = append(cands, cand{s, s.lastUsed})
		}
		s.mu.Unlock()
	}
	slices.SortFunc(cands, func(a, b cand) int { return a.last.Compare(b.last) })
	for _, c := range cands {
		s := c.s
		if !s.mu.TryLock() {
			continue
		}
		if s.deleted || s.active > 0 || s.box == nil {
			s.mu.Unlock()
			continue
		}
		m.keep(ctx, s)
		err := m.stopBox(ctx, s.box, "the session's sandbox was idle and its place was needed by another run")
		s.box = nil
		s.mu.Unlock()
		if err != nil {
			m.log.Warn("stopping an idle session's sandbox to make room", "session", s.id, "error", err)
		} else {
			m.log.Info("stopped an idle session's sandbox to make room for another", "session", s.id)
		}
		m.opts.Counters.StoppedForRoom.Add(1)
		return true
	}
	return false
}
