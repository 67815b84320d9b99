package host

import (
	"io"
	"net/http"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"
	"time"
)

// downloadSize is the file of TestSessionFileDownloadStreams: many times
// the memory the download may take.
const downloadSize = 48 << 20

// filePattern gives the bytes of the file: byte i is patternAt(i).
type filePattern struct{ off, size int64 }

func patternAt(i int64) byte { return byte(i*13 + i>>16) }

func (p *filePattern) Read(b []byte) (int, error) {
	if p.off >= p.size {
		return 0, io.EOF
	}
	b = b[:min(int64(len(b)), p.size-p.off)]
	for i := range b {
		b[i] = patternAt(p.off + int64(i))
	}
	p.off += int64(len(b))
	return len(b), nil
}

// TestSessionFileDownloadStreams: a file of 48 MiB of a session, read over
// GET /api/v1/sessions/{id}/files/{path} from the real plugin process
// through the plugin protocol, arrives byte for byte with its length said
// up front, while the host's heap (this process) grows by a few chunks: a
// caller that reads slowly leaves the rest in the plugin's file, not in the
// host. A generous bound: buffering the file would take 48 MiB.
func TestSessionFileDownloadStreams(t *testing.T) {
	th := startSessionsHost(t, sessionsPluginHead(t), filepath.Join(t.TempDir(), "state"), nil, "")
	put, _ := http.NewRequest("PUT", th.srv.URL+"/api/v1/sessions/big/files/out/big.bin", &filePattern{size: downloadSize})
	put.Header.Set("Authorization", "Bearer ed-token")
	resp, err := http.DefaultClient.Do(put)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("PUT of %d bytes: %d", downloadSize, resp.StatusCode)
	}

	// Garbage is collected often, so that the heap's peak is what is held.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var before, ms runtime.MemStats
	runtime.ReadMemStats(&before)
	get, _ := http.NewRequest("GET", th.srv.URL+"/api/v1/sessions/big/files/out/big.bin", nil)
	get.Header.Set("Authorization", "Bearer ed-token")
	resp, err = http.DefaultClient.Do(get)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Length") != strconv.Itoa(downloadSize) {
		t.Fatalf("GET: %d, Content-Length %q; want 200 and %d", resp.StatusCode, resp.Header.Get("Content-Length"), downloadSize)
	}
	// A slow caller: the plugin may send ahead as far as the host lets it.
	time.Sleep(300 * time.Millisecond)
	buf := make([]byte, 64<<10)
	var off, bad int64 = 0, -1
	var peak uint64
	for next := int64(0); ; {
		n, err := resp.Body.Read(buf)
		for i, x := range buf[:n] {
			if bad < 0 && x != patternAt(off+int64(i)) {
				bad = off + int64(i)
			}
		}
		off += int64(n)
		if off >= next {
			next += 1 << 20
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reading the download at %d bytes: %v", off, err)
		}
	}
	if off != downloadSize || bad >= 0 {
		t.Fatalf("the download gave %d bytes, the first wrong at %d; want the %d uploaded", off, bad, downloadSize)
	}
	t.Logf("host heap before %.1f MiB, at most %.1f MiB while sending 48 MiB", float64(before.HeapAlloc)/(1<<20), float64(peak)/(1<<20))
	if growth := int64(peak) - int64(before.HeapAlloc); growth > 8<<20 {
		t.Errorf("the host's heap grew by %.1f MiB while sending a file of 48 MiB; want less than 8 MiB", float64(growth)/(1<<20))
	}
}
