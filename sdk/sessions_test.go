package sdk_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/errcode"
	"github.com/toolhost/toolhost/sdk/hostside"
	"github.com/toolhost/toolhost/sdk/sdktest"
)

// keeperKind is a kind that keeps "sessions" in memory: a map of files per
// session, a disk of diskBytes per session, and a record of what it was
// asked.
type keeperKind struct {
	echoKind
	diskBytes int

	mu       sync.Mutex
	cfg      sdk.SessionsConfig
	files    map[string]map[string][]byte
	stopped  []string
	lastCall sdk.Call
	// readErr is the error the last WriteFile got from its reader, if any.
	readErr error
	// writing, when set, is closed as WriteFile starts.
	writing chan struct{}
}

var _ sdk.SessionKeeper = (*keeperKind)(nil)

func newKeeper() *keeperKind {
	return &keeperKind{diskBytes: 16 << 20, files: map[string]map[string][]byte{}}
}

func (k *keeperKind) Invoke(_ context.Context, call sdk.Call, _ sdk.Emit) (json.RawMessage, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.lastCall = call
	return json.RawMessage(`{}`), nil
}

func (k *keeperKind) ConfigureSessions(_ context.Context, cfg sdk.SessionsConfig) error {
	if cfg.DiskMB > 4096 {
		return sdk.Errorf(errcode.BadArgs, "a workspace of %d MiB is larger than this machine allows", cfg.DiskMB)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.cfg = cfg
	return nil
}

func checkPath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || slices.Contains(strings.Split(p, "/"), "..") {
		return sdk.Errorf(errcode.BadPath, "%q leaves the workspace: name a file inside it, like \"data/in.csv\"", p)
	}
	return nil
}

func (k *keeperKind) ListFiles(_ context.Context, session string) ([]sdk.SessionFile, error) {
	if session == "sboom" {
		return nil, errors.New("the workspace's image can't be mounted")
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []sdk.SessionFile
	for _, p := range slices.Sorted(maps.Keys(k.files[session])) {
		out = append(out, sdk.SessionFile{Path: p, Size: int64(len(k.files[session][p])), ModTime: time.UnixMilli(1700000000123)})
	}
	return out, nil
}

func (k *keeperKind) OpenFile(_ context.Context, session, path string, max int64) (io.ReadCloser, int64, error) {
	if err := checkPath(path); err != nil {
		return nil, 0, err
	}
	if path == "huge.bin" {
		// A file of hugeSize made as it is read: no memory of its own.
		return io.NopCloser(io.LimitReader(&pattern{}, hugeSize)), hugeSize, nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	data, ok := k.files[session][path]
	if !ok {
		return nil, 0, sdk.Errorf(errcode.NotFound, "there is no file %s in the session", path)
	}
	if max > 0 && int64(len(data)) > max {
		return nil, 0, sdk.Errorf(errcode.TooLarge, "%s is %d bytes, more than the %d asked for", path, len(data), max)
	}
	return io.NopCloser(bytes.NewReader(data)), int64(len(data)), nil
}

func (k *keeperKind) WriteFile(_ context.Context, session, path string, r io.Reader) (sdk.SessionFile, error) {
	if err := checkPath(path); err != nil {
		return sdk.SessionFile{}, err
	}
	if k.writing != nil {
		close(k.writing)
	}
	data, err := io.ReadAll(io.LimitReader(r, int64(k.diskBytes)+1))
	k.mu.Lock()
	defer k.mu.Unlock()
	k.readErr = err
	if err != nil {
		return sdk.SessionFile{}, err
	}
	if len(data) > k.diskBytes {
		return sdk.SessionFile{}, sdk.Errorf(errcode.DiskFull, "the session's workspace is full (%d bytes)", k.diskBytes)
	}
	if k.files[session] == nil {
		k.files[session] = map[string][]byte{}
	}
	k.files[session][path] = data
	return sdk.SessionFile{Path: path, Size: int64(len(data)), ModTime: time.UnixMilli(1700000000456)}, nil
}

func (k *keeperKind) RemoveFile(_ context.Context, session, path string) error {
	if err := checkPath(path); err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.files[session][path]; !ok {
		return sdk.Errorf(errcode.NotFound, "there is no file %s in the session", path)
	}
	delete(k.files[session], path)
	return nil
}

func (k *keeperKind) StopSession(_ context.Context, session string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopped = append(k.stopped, session)
	return nil
}

func (k *keeperKind) DeleteSession(_ context.Context, session string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.files, session)
	return nil
}

func (k *keeperKind) Reconcile(_ context.Context, keep []string) ([]string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var removed []string
	for _, s := range slices.Sorted(maps.Keys(k.files)) {
		if !slices.Contains(keep, s) {
			delete(k.files, s)
			removed = append(removed, s)
		}
	}
	return removed, nil
}

const (
	sessA = "s0123456789abcdef01234567"
	sessB = "s89abcdef0123456789abcdef"
)

func startKeeper(t *testing.T) (*keeperKind, *sdktest.Conn, *hostside.SessionsClient) {
	t.Helper()
	k := newKeeper()
	c := sdktest.Start(t, k, nil)
	return k, c, c.Sessions("keeper")
}

// TestSessionsEveryCall: each call of the Sessions service reaches the
// keeper with what the host gave and brings back what the keeper answered.
func TestSessionsEveryCall(t *testing.T) {
	k, c, s := startKeeper(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	info, _, err := c.Describe(ctx)
	if err != nil || !info.ServesSessions {
		t.Fatalf("Describe = %+v, %v; want ServesSessions", info, err)
	}
	want := sdk.SessionsConfig{DiskMB: 1024, MemoryMB: 512, Pids: 128, IdleMinutes: 15, Seconds: 60,
		ProxyAddr: netip.MustParseAddrPort("10.200.0.1:3128")}
	if err := s.ConfigureSessions(ctx, want); err != nil {
		t.Fatal(err)
	}
	if k.cfg != want {
		t.Errorf("the keeper got %+v; want %+v", k.cfg, want)
	}

	f, err := s.WriteFile(ctx, sessA, "data/in.csv", strings.NewReader("a,b\n1,2\n"))
	if err != nil || f.Path != "data/in.csv" || f.Size != 8 || f.ModTime.UnixMilli() != 1700000000456 {
		t.Fatalf("WriteFile = %+v, %v", f, err)
	}
	if _, err := s.WriteFile(ctx, sessA, "empty", strings.NewReader("")); err != nil {
		t.Fatalf("WriteFile of an empty file: %v", err)
	}
	if _, err := s.WriteFile(ctx, sessB, "other.txt", strings.NewReader("b")); err != nil {
		t.Fatal(err)
	}
	files, err := s.ListFiles(ctx, sessA)
	if err != nil || len(files) != 2 || files[0].Path != "data/in.csv" || files[0].Size != 8 ||
		files[1].Path != "empty" || files[0].ModTime.UnixMilli() != 1700000000123 {
		t.Fatalf("ListFiles = %+v, %v", files, err)
	}
	if files, err := s.ListFiles(ctx, "s000000000000000000000000"); err != nil || len(files) != 0 {
		t.Fatalf("ListFiles of a session never used = %+v, %v", files, err)
	}
	if data, err := s.ReadFile(ctx, sessA, "data/in.csv", 0); err != nil || string(data) != "a,b\n1,2\n" {
		t.Fatalf("ReadFile = %q, %v", data, err)
	}
	if data, err := s.ReadFile(ctx, sessA, "empty", 100); err != nil || len(data) != 0 {
		t.Fatalf("ReadFile of an empty file = %q, %v", data, err)
	}
	if err := s.RemoveFile(ctx, sessA, "empty"); err != nil {
		t.Fatal(err)
	}
	if _, ok := k.files[sessA]["empty"]; ok {
		t.Errorf("RemoveFile left the file")
	}
	if err := s.StopSession(ctx, sessA); err != nil || !slices.Equal(k.stopped, []string{sessA}) {
		t.Fatalf("Stop = %v; the keeper stopped %v", err, k.stopped)
	}
	removed, err := s.Reconcile(ctx, []string{sessA})
	if err != nil || !slices.Equal(removed, []string{sessB}) {
		t.Fatalf("Reconcile = %v, %v; want [%s]", removed, err, sessB)
	}
	if err := s.DeleteSession(ctx, sessA); err != nil || k.files[sessA] != nil {
		t.Fatalf("Delete = %v; files left %v", err, k.files[sessA])
	}
	if removed, err := s.Reconcile(ctx, nil); err != nil || len(removed) != 0 {
		t.Fatalf("Reconcile of nothing = %v, %v", removed, err)
	}

	// A run in a session carries its network and proxy to the kind.
	_, err = c.KindClient.Invoke(ctx, hostside.Invocation{Tool: sdktest.Tool(t, "run_bash", map[string]any{"type": "echo"}),
		Args: json.RawMessage(`{}`), RunID: "r1", Session: sessA, SessionNetwork: config.SessionNetworkPackages,
		SessionProxy: "http://" + sessA + ":tok@10.200.0.1:3128"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lc := k.lastCall; lc.Session != sessA || lc.SessionNetwork != "packages" || lc.SessionProxy != "http://"+sessA+":tok@10.200.0.1:3128" {
		t.Errorf("the kind got session %q, network %q, proxy %q", lc.Session, lc.SessionNetwork, lc.SessionProxy)
	}
}

// TestSessionsErrorsKeepTheirCodes: the keeper's coded errors reach the
// host as *errcode.Error with code and message; others as the plugin's
// failure in a sentence, never as a code the user would misread.
func TestSessionsErrorsKeepTheirCodes(t *testing.T) {
	k, _, s := startKeeper(t)
	k.diskBytes = 1 << 20
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.WriteFile(ctx, sessA, "big.bin", strings.NewReader(strings.Repeat("x", 1000))); err != nil {
		t.Fatal(err)
	}
	coded := func(name string, err error, code, msg string) {
		t.Helper()
		var e *errcode.Error
		if !errors.As(err, &e) || e.Code != code || e.Message != msg {
			t.Errorf("%s: got %#v (%v); want %s %q", name, e, err, code, msg)
		}
	}
	_, err := s.ReadFile(ctx, sessA, "missing.txt", 0)
	coded("read missing", err, errcode.NotFound, "there is no file missing.txt in the session")
	err = s.RemoveFile(ctx, sessA, "missing.txt")
	coded("remove missing", err, errcode.NotFound, "there is no file missing.txt in the session")
	_, err = s.ReadFile(ctx, sessA, "../../etc/passwd", 0)
	coded("read ..", err, errcode.BadPath, `"../../etc/passwd" leaves the workspace: name a file inside it, like "data/in.csv"`)
	_, err = s.WriteFile(ctx, sessA, "/etc/passwd", strings.NewReader("root::0:0::/:/bin/sh\n"))
	coded("write absolute", err, errcode.BadPath, `"/etc/passwd" leaves the workspace: name a file inside it, like "data/in.csv"`)
	_, err = s.ReadFile(ctx, sessA, "big.bin", 999)
	coded("read too large", err, errcode.TooLarge, "big.bin is 1000 bytes, more than the 999 asked for")
	err = s.ConfigureSessions(ctx, sdk.SessionsConfig{DiskMB: 5000})
	coded("configure", err, errcode.BadArgs, "a workspace of 5000 MiB is larger than this machine allows")

	// A writer past the disk: the keeper stops reading and says so, the
	// host's upload stops with its code (20 MiB are never all sent).
	_, err = s.WriteFile(ctx, sessA, "huge.bin", io.LimitReader(zeros{}, 20<<20))
	coded("disk full", err, errcode.DiskFull, "the session's workspace is full (1048576 bytes)")
	if _, ok := k.files[sessA]["huge.bin"]; ok {
		t.Errorf("the file that filled the disk was kept")
	}

	// The keeper's own failure: a sentence naming what failed, no code.
	_, err = s.ListFiles(ctx, "sboom")
	if errcode.Code(err) != "" || err == nil || !strings.Contains(err.Error(), "the workspace's image can't be mounted") {
		t.Errorf("a plain failure reads %v (code %q)", err, errcode.Code(err))
	}
	// No session named: refused before the keeper.
	_, err = s.ListFiles(ctx, "")
	coded("no session", err, errcode.BadArgs, "no session was named")

	// An upload whose reader fails: the host's error wraps it, and the
	// keeper sees the upload broken off rather than a short file.
	boom := errors.New("the client went away")
	k.writing = make(chan struct{})
	_, err = s.WriteFile(ctx, sessA, "cut.bin", io.MultiReader(io.LimitReader(zeros{}, 600<<10), failing{k.writing, boom}))
	if !errors.Is(err, boom) {
		t.Errorf("a failing upload gave %v; want it to wrap %v", err, boom)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		k.mu.Lock()
		readErr, kept := k.readErr, k.files[sessA]["cut.bin"] != nil
		k.mu.Unlock()
		if kept {
			t.Fatalf("the broken-off upload was kept as a file")
		}
		if readErr != nil || time.Now().After(deadline) {
			if readErr == nil {
				t.Fatalf("the keeper never saw the upload broken off")
			}
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSessionsWithoutAKeeper: a kind that keeps no sessions says so in
// Describe, and its Sessions calls are unsupported, not a crash.
func TestSessionsWithoutAKeeper(t *testing.T) {
	c := sdktest.Start(t, &echoKind{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	info, _, err := c.Describe(ctx)
	if err != nil || info.ServesSessions {
		t.Fatalf("Describe = %+v, %v; want no sessions", info, err)
	}
	_, err = c.Sessions("echo").ListFiles(ctx, sessA)
	var e *errcode.Error
	if !errors.As(err, &e) || e.Code != errcode.Unsupported || e.Message != "the echo plugin keeps no conversation sandboxes" {
		t.Fatalf("ListFiles of a kind without sessions = %v", err)
	}
}

// TestSessionsStreamFilesOfSomeMiB: files larger than gRPC's 4 MiB bound on
// a message go both ways whole, in chunks.
func TestSessionsStreamFilesOfSomeMiB(t *testing.T) {
	_, _, s := startKeeper(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	data := make([]byte, 6<<20+12345)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	f, err := s.WriteFile(ctx, sessA, "out/blob.bin", bytes.NewReader(data))
	if err != nil || f.Size != int64(len(data)) {
		t.Fatalf("WriteFile of %d bytes = %+v, %v", len(data), f, err)
	}
	got, err := s.ReadFile(ctx, sessA, "out/blob.bin", int64(len(data)))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("ReadFile gave %d bytes (equal %v), %v; want the %d written", len(got), bytes.Equal(got, data), err, len(data))
	}
	// A reader that gives a byte at a time is still one file.
	f, err = s.WriteFile(ctx, sessA, "slow.txt", &oneByte{r: strings.NewReader(fmt.Sprint(strings.Repeat("ab", 1000)))})
	if err != nil || f.Size != 2000 {
		t.Fatalf("WriteFile from a slow reader = %+v, %v", f, err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// failing fails once after is closed.
type failing struct {
	after <-chan struct{}
	err   error
}

func (f failing) Read([]byte) (int, error) {
	<-f.after
	return 0, f.err
}

type oneByte struct{ r io.Reader }

func (o *oneByte) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return o.r.Read(p[:1])
}

// hugeSize is the size of the keeper's "huge.bin": more than the host's
// bound of 64 MiB on a download would be no use to a test of the stream,
// so 48 MiB, far more than the memory it may take.
const hugeSize = 48 << 20

// pattern gives the bytes of huge.bin: byte i is patternByte(i).
type pattern struct{ off int64 }

func patternByte(i int64) byte { return byte(i*7 + i>>12) }

func (p *pattern) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = patternByte(p.off + int64(i))
	}
	p.off += int64(len(b))
	return len(b), nil
}

// checker checks that what is written is pattern's, and samples the heap
// every MiB.
type checker struct {
	off, nextSample int64
	bad             int64 // the first wrong byte's offset +1, 0: none
	heapMax         uint64
}

func (c *checker) Write(b []byte) (int, error) {
	for i, x := range b {
		if c.bad == 0 && x != patternByte(c.off+int64(i)) {
			c.bad = c.off + int64(i) + 1
		}
	}
	c.off += int64(len(b))
	if c.off >= c.nextSample {
		c.nextSample += 1 << 20
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		c.heapMax = max(c.heapMax, ms.HeapAlloc)
	}
	return len(b), nil
}

// TestSessionsReadFileStreamsInBoundedMemory: a file of 48 MiB reaches the
// host byte for byte, its size said before the first byte, while the heap
// (plugin and host: both ends are this process) grows by some chunks, not
// by the file. A generous bound: buffering the file would take 48 MiB at
// each end, and this test's connection has gRPC's default windows, which
// grow with the bandwidth (the host's are fixed: host/plugins, and
// TestSessionFileDownloadStreams of package host holds it to 8 MiB).
func TestSessionsReadFileStreamsInBoundedMemory(t *testing.T) {
	_, _, s := startKeeper(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Garbage is collected often, so that the heap's peak is what is held.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	r, size, err := s.OpenFile(ctx, sessA, "huge.bin", 64<<20)
	if err != nil || size != hugeSize {
		t.Fatalf("OpenFile of huge.bin = %d, %v; want its size, %d", size, err, hugeSize)
	}
	defer r.Close()
	c := &checker{}
	n, err := io.CopyBuffer(c, r, make([]byte, 32<<10))
	if err != nil || n != hugeSize || c.bad != 0 {
		t.Fatalf("reading huge.bin gave %d bytes (first wrong at %d), %v; want its %d bytes", n, c.bad-1, err, hugeSize)
	}
	growth := int64(c.heapMax) - int64(before.HeapAlloc)
	t.Logf("heap before %.1f MiB, at most %.1f MiB while reading 48 MiB", float64(before.HeapAlloc)/(1<<20), float64(c.heapMax)/(1<<20))
	if growth > 16<<20 {
		t.Errorf("the heap grew by %.1f MiB while reading a file of 48 MiB; want less than 16 MiB", float64(growth)/(1<<20))
	}
	// A bound below the file's size refuses it before a byte is sent.
	if _, _, err := s.OpenFile(ctx, sessA, "huge.bin", 1<<20); errcode.Code(err) != errcode.TooLarge {
		t.Errorf("OpenFile of huge.bin with a bound of 1 MiB = %v; want too_large", err)
	}
}
