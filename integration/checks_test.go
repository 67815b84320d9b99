package integration

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
)

// TestCheckStormIsCappedByMaxRunning: an editor with max_running 1 fires
// six checks of a python tool at once (each compiles its code in a
// sandbox): every answer is 200 or 429 too_many_runs, at least one of
// each, while another token's python call made during the storm succeeds;
// afterwards the editor holds no place.
func TestCheckStormIsCappedByMaxRunning(t *testing.T) {
	_, runscBin, rootfs := sandboxBuild(t)
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	dir := t.TempDir()
	cfg := tokensConfig() + fmt.Sprintf("\n[runs]\nmax_running_per_token = 1\n\n[python]\nrunsc = %q\nrootfs = %q\nstate_dir = %q\nsandbox_prefix = %q\nwork_mb = 64\n[python.pool]\nsize = 0\n",
		runscBin, rootfs, filepath.Join(dir, "python"), "thck"+hex.EncodeToString(b)+"-")
	h := startHostIn(t, dir, freePort(t), hostSpec{Config: cfg, Tools: map[string]string{"picture.toml": pictureTool}})

	const storm = 6
	codes := make([]string, storm)
	var wg sync.WaitGroup
	for i := range storm {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, body := request(t, "POST", h.URL("/api/v1/tools/check"), editorToken, pictureTool)
			e, _ := body["error"].(map[string]any)
			codes[i] = fmt.Sprintf("%d %v", status, e["code"])
		}()
	}
	status, out := request(t, "POST", h.URL("/api/v1/tools/picture/call"), adminToken, `{}`)
	wg.Wait()
	if status != http.StatusOK || fmt.Sprint(out["result"]) != "map[width:1]" {
		t.Errorf("another token's python call during the storm: %d %v", status, out)
	}
	ok, capped := 0, 0
	for _, c := range codes {
		switch c {
		case "200 <nil>":
			ok++
		case "429 too_many_runs":
			capped++
		default:
			t.Errorf("a check in the storm answered %s", c)
		}
	}
	if ok == 0 || capped == 0 {
		t.Errorf("the storm's checks answered %v: want some 200 and the excess 429 too_many_runs", codes)
	}
	if _, me := request(t, "GET", h.URL("/api/v1/me"), editorToken, ""); me["going"] != 0.0 {
		t.Errorf("after the storm the editor holds places: %v", me)
	}
	if status, body := request(t, "POST", h.URL("/api/v1/tools/check"), editorToken, pictureTool); status != http.StatusOK {
		t.Errorf("a check after the storm: %d %v", status, body)
	}
}
