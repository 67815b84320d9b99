package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeExitsWithEXCONFIGOnABadConfig: a config with problems ends serve with 78 (the unit's
// RestartPreventExitStatus), not 2, the status of a Go panic and of the watchdog's SIGABRT,
// after which systemd must restart the host.
func TestServeExitsWithEXCONFIGOnABadConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "toolhost.toml")
	if err := os.WriteFile(path, []byte("[server]\nlisten = 8080\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"serve", "--config", path}, &stdout, &stderr); code != 78 {
		t.Fatalf("serve with a bad config exited %d, want 78\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "toolhost.toml:2") {
		t.Errorf("serve did not say where the config is wrong: %s", stderr.String())
	}
	unit, err := os.ReadFile("../../../examples/systemd/toolhost.service")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "RestartPreventExitStatus=78\n") {
		t.Error("the unit does not keep from restarting a host whose config has problems (RestartPreventExitStatus=78)")
	}
}

// TestReadHealthSaysAHostIsDraining: `toolhost reload` against a host that
// is stopping says so, not only the status code.
func TestReadHealthSaysAHostIsDraining(t *testing.T) {
	body, code := `{"status":"ok","reloads":2,"reloads_refused":1}`, http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	h, err := readHealth(context.Background(), srv.Client(), srv.URL)
	if err != nil || h.Applied != 2 || h.Refused != 1 {
		t.Fatalf("a serving host: %+v, %v", h, err)
	}
	body, code = `{"status":"draining","reloads":2,"reloads_refused":1}`, http.StatusServiceUnavailable
	if _, err := readHealth(context.Background(), srv.Client(), srv.URL); err == nil || !strings.Contains(err.Error(), "503 Service Unavailable: the host is stopping") {
		t.Errorf("a draining host: %v", err)
	}
	body, code = `oops`, http.StatusInternalServerError
	if _, err := readHealth(context.Background(), srv.Client(), srv.URL); err == nil || strings.Contains(err.Error(), "stopping") {
		t.Errorf("a failing host: %v", err)
	}
}
