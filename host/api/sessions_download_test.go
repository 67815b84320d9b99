package api

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host/sessions"
	"github.com/toolhost/toolhost/host/sessions/sessionstest"
)

// breaking is a backend whose "broken.bin" breaks off after 1 MiB, as a
// plugin that fails midway; its size is not said, so the response is
// chunked and only a cut connection tells the caller.
type breaking struct{ *sessionstest.Backend }

func (b breaking) OpenFile(ctx context.Context, id, path string, max int64) (io.ReadCloser, int64, error) {
	if path == "broken.bin" {
		r := io.MultiReader(bytes.NewReader(make([]byte, 1<<20)), failReader{})
		return io.NopCloser(r), -1, nil
	}
	return b.Backend.OpenFile(ctx, id, path, max)
}

type failReader struct{}

func (failReader) Read([]byte) (int, error) { return 0, errors.New("the plugin went away") }

// TestSessionFileGETStreams: a file of some MiB arrives byte for byte with
// its Content-Length; one that breaks off midway cuts the connection, so
// the caller never takes a part for the whole.
func TestSessionFileGETStreams(t *testing.T) {
	st, err := sessions.OpenStore(context.Background(), filepath.Join(t.TempDir(), sessions.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default().Sessions
	cfg.Enabled = true
	svc := sessions.New(sessions.Options{Config: cfg})
	back := breaking{sessionstest.New()}
	svc.Attach(st, back)
	t.Cleanup(func() { svc.Close() })
	h := newTestHost(t, Options{Tokens: tokens("ed", "editor"), Sessions: svc})

	data := make([]byte, 5<<20+321)
	for i := range data {
		data[i] = byte(i*31 + i>>10)
	}
	if code, body, _ := raw(t, h, "PUT", "/api/v1/sessions/c/files/out/data.bin", "ed-token", bytes.NewReader(data)); code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	code, body, hdr := raw(t, h, "GET", "/api/v1/sessions/c/files/out/data.bin", "ed-token", nil)
	if code != 200 || !bytes.Equal(body, data) || hdr.Get("Content-Length") != strconv.Itoa(len(data)) {
		t.Fatalf("GET: %d, %d bytes (equal %v), Content-Length %q; want 200 and the %d bytes put", code, len(body), bytes.Equal(body, data), hdr.Get("Content-Length"), len(data))
	}

	// A file of the session that breaks off after its header went.
	if code, body, _ := raw(t, h, "PUT", "/api/v1/sessions/c/files/broken.bin", "ed-token", bytes.NewReader([]byte("x"))); code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	req, _ := http.NewRequest("GET", h.srv.URL+"/api/v1/sessions/c/files/broken.bin", nil)
	req.Header.Set("Authorization", "Bearer ed-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil {
		t.Errorf("a file that broke off after %d bytes was read without an error", n)
	}
}
