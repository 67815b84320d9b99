package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestReadHealthTakesAHostWhoseStoreIsDown: a host answering /healthz 503
// because only its store is unavailable still serves, and picks its
// database up by itself: `toolhost reload` reads its counts and the
// watchdog is fed (restarting it would not bring the database back). Any
// other 503, or another status, is a host that does not answer well.
func TestReadHealthTakesAHostWhoseStoreIsDown(t *testing.T) {
	for _, c := range []struct {
		status int
		body   string
		ok     bool
	}{
		{http.StatusOK, `{"status":"ok","reloads":2,"reloads_refused":1,"store":"ok"}`, true},
		{http.StatusOK, `{"status":"ok","reloads":2,"reloads_refused":1}`, true},
		{http.StatusServiceUnavailable, `{"status":"store_unavailable","reloads":2,"reloads_refused":1,"store":"unavailable"}`, true},
		{http.StatusServiceUnavailable, `{"status":"ok","reloads":2,"reloads_refused":1}`, false},
		{http.StatusInternalServerError, `{"reloads":2,"reloads_refused":1,"store":"unavailable"}`, false},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(c.status)
			_, _ = w.Write([]byte(c.body))
		}))
		h, err := readHealth(context.Background(), srv.Client(), srv.URL+"/healthz")
		srv.Close()
		if c.ok != (err == nil) || c.ok && (h.Applied != 2 || h.Refused != 1) {
			t.Errorf("%d %s: %+v, %v; want ok %v", c.status, c.body, h, err, c.ok)
		}
	}
}
