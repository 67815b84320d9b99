package session

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolhost/toolhost/runsc"
	"github.com/toolhost/toolhost/runsc/sandbox"
)

// shown records a run's output and images in the order they came.
type shown struct {
	mu    sync.Mutex
	items []string // "o:TEXT", "e:TEXT", "img:MIME:BYTES"
	data  [][]byte // each image's bytes
}

func (s *shown) run(r Run) Run {
	r.Stdout = func(b []byte) { s.add("o:" + string(b)) }
	r.Stderr = func(b []byte) { s.add("e:" + string(b)) }
	r.Display = func(mime string, data []byte) {
		s.add(fmt.Sprintf("img:%s:%d", mime, len(data)))
		s.mu.Lock()
		s.data = append(s.data, data)
		s.mu.Unlock()
	}
	return r
}

func (s *shown) add(item string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Chunks of one stream that come one after the other are one item.
	if n := len(s.items); n > 0 && item[:2] != "im" && strings.HasPrefix(s.items[n-1], item[:2]) {
		s.items[n-1] += item[2:]
		return
	}
	s.items = append(s.items, item)
}

func (s *shown) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.items...)
}

// pngCell defines png(), a valid PNG of w×h pixels (zlib and struct only), and Picture, an
// object that shows as one (_repr_png_, as PIL's images do).
const pngCell = `
import struct, zlib
def png(w=2, h=2):
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\x00" + b"\xff\x00\x00" * w for _ in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
class Picture:
    def __init__(self, w=2, h=2):
        self.w, self.h = w, h
    def _repr_png_(self):
        return png(self.w, self.h)
`

// TestACellShowsImages: an image a cell shows (display(), or a last expression that is one)
// comes to Run.Display with its bytes, in order with what the cell printed, and is not printed
// as a value; anything else display() prints. What the code forges on the interpreter's pipe
// to the agent (bytes that aren't the image they claim, an image over 4 MiB) is refused and
// said on stderr, and the interpreter carries on.
func TestACellShowsImages(t *testing.T) {
	ts := newSetup(t)
	m := ts.manager(t, Options{})
	id := testID("display")
	cell(t, m, id, pngCell, Run{})

	var s shown
	res, err := m.Run(t.Context(), id, s.run(Run{Language: "python", Timeout: time.Minute,
		Code: "print('before')\ndisplay(Picture(3, 1))\nprint('after')\ndisplay(42, 'x')\nPicture(5, 5)"}))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"o:before\n", fmt.Sprintf("img:image/png:%d", pngSize(t, m, id, 3, 1)), "o:after\n42\n'x'\n",
		fmt.Sprintf("img:image/png:%d", pngSize(t, m, id, 5, 5))}
	if got := s.list(); res.ExitCode != 0 || res.Value != "" || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("a cell that prints and shows images: %+v, %q; want %q and no value", res, got, want)
	}
	if !bytes.HasPrefix(s.data[0], []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("the image's bytes: %q…", s.data[0][:min(16, len(s.data[0]))])
	}

	// Forged on the interpreter's own pipe: a "PNG" that isn't one, and one over 4 MiB.
	forge := `import builtins, base64, json, os
d = builtins.__toolhost_show_figures__.__self__
d.send("image/png", b"GIF89a not a png")
os.write(d.fd, (json.dumps({"display": {"mime_type": "image/png", "data": base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(5 << 20)).decode()}}) + "\n").encode())
d.send("image/png", b"\x89PNG\r\n\x1a\n" + bytes(5 << 20))
print("still here")
`
	var f shown
	res, err = m.Run(t.Context(), id, f.run(Run{Language: "python", Timeout: time.Minute, Code: forge}))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(f.list(), "|")
	for _, w := range []string{`its bytes are not the "image/png" it says`, "larger than 4 MiB", "an image of 5242888 bytes was not shown", "still here"} {
		if !strings.Contains(got, w) {
			t.Errorf("forged images: %q; want %q in it", got, w)
		}
	}
	if strings.Contains(got, "img:") || res.ExitCode != 0 {
		t.Errorf("forged images: %+v, %q; want none shown, exit 0", res, got)
	}
	if res, _, _ := cell(t, m, id, "Picture(1, 1)._repr_png_()[:4]", Run{}); res.Value != `b'\x89PNG'` {
		t.Errorf("after the forgeries: %+v", res)
	}
}

// pngSize is the size of png(w, h) as the session's interpreter makes it.
func pngSize(t *testing.T, m *Manager, id string, w, h int) int {
	t.Helper()
	res, _, _ := cell(t, m, id, fmt.Sprintf("len(png(%d, %d))", w, h), Run{})
	var n int
	if _, err := fmt.Sscan(res.Value, &n); err != nil {
		t.Fatalf("len(png()): %+v", res)
	}
	return n
}

// TestAFigureShows, on the session rootfs (matplotlib): plt.show() shows the figures drawn, a
// figure left open shows at the cell's end, a cell ending in a figure shows it instead of its
// repr, and a figure drawn by a process the cell starts (Agg there) is saved, not shown; the
// first import of matplotlib writes nothing into /work.
func TestAFigureShows(t *testing.T) {
	env := testEnv.NeedSessions()
	if env.Skip != "" {
		t.Skip(env.Skip)
	}
	ts := newSetup(t)
	rt, err := runsc.NewRuntime(runsc.RuntimeOptions{Binary: testEnv.Runsc, Root: filepath.Join(ts.state, "runsc")})
	if err != nil {
		t.Fatal(err)
	}
	sm, err := sandbox.NewManager(sandbox.ManagerOptions{Runtime: rt, Rootfs: env.SessionRootfs, StateDir: ts.state, Prefix: testEnv.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	lim := testLimits()
	lim.MemoryBytes = 512 << 20
	m, err := New(Options{Sandboxes: sm, Dir: ts.dir, DiskMB: 64, Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = m.Close(ctx)
		_ = sm.Close(ctx)
	})
	id := testID("figure")
	run := func(code string) (Result, []string, [][]byte) {
		t.Helper()
		var s shown
		res, err := m.Run(t.Context(), id, s.run(Run{Language: "python", Timeout: 2 * time.Minute, Code: code}))
		if err != nil {
			t.Fatal(err)
		}
		return res, s.list(), s.data
	}
	isPNG := func(items []string, data [][]byte) bool {
		for i, d := range data {
			if !bytes.HasPrefix(d, []byte("\x89PNG\r\n\x1a\n")) || len(d) < 1000 {
				t.Errorf("image %d: %d bytes, %q…", i, len(d), d[:min(8, len(d))])
				return false
			}
		}
		return true
	}
	res, items, data := run("import matplotlib.pyplot as plt\nprint('before')\nplt.plot([1, 3, 2])\nplt.show()\nprint('after')\nplt.figure()\nplt.bar(['a'], [1])")
	if got := strings.Join(strip(items), "|"); res.ExitCode != 0 || got != "o:before\n|img:image/png|o:after\n|img:image/png" || !isPNG(items, data) {
		t.Fatalf("plt.show() between prints, then a figure left open: %+v, %q; want before, a figure, after, a figure", res, items)
	}
	res, items, _ = run("fig, ax = plt.subplots()\nax.plot([0, 1])\nfig")
	if got := strings.Join(strip(items), "|"); got != "img:image/png" || res.Value != "" {
		t.Errorf("a cell ending in a figure: %+v, %q; want the figure alone, no value", res, items)
	}
	res, items, _ = run("import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'import matplotlib.pyplot as plt; plt.plot([1]); plt.show(); plt.savefig(\"p.png\"); print(plt.get_backend())'], check=True)\nimport os\nsorted(os.listdir('.'))")
	if got := strings.Join(strip(items), "|"); got != "o:agg\n" || res.Value != "['p.png']" {
		t.Errorf("a figure drawn by a process of the cell: %+v, %q; want it saved with Agg, none shown, only p.png in /work", res, items)
	}
}

// strip is items without the images' sizes.
func strip(items []string) []string {
	out := make([]string, len(items))
	for i, it := range items {
		if strings.HasPrefix(it, "img:") {
			it = it[:strings.LastIndex(it, ":")]
		}
		out[i] = it
	}
	return out
}
