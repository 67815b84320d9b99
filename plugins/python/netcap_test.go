package main

import (
	"fmt"
	"net"
	"strconv"
	"testing"

	"github.com/toolhost/toolhost/runsc/sandbox"
)

// TestNetworkConnectionCapSaysSo: code that keeps more connections open at once than a python
// tool may is refused past the cap, and the error says that, with the cap, rather than that it
// tried a forbidden address.
func TestNetworkConnectionCapSaysSo(t *testing.T) {
	t.Parallel()
	c := conn(t, true)
	l := openLab(t)
	host, port, _ := net.SplitHostPort(l.serveInNS(t, "lab"))
	capN := sandbox.NetworkOptions{}.ConnectionCap()
	code := fmt.Sprintf(`
import socket
def run(host, port):
    held = []
    for i in range(%d):
        held.append(socket.create_connection((host, port), timeout=10))
    return len(held)
`, capN+6)
	p, _ := strconv.Atoi(port)
	r := invoke(t, c, code, map[string]any{"network": true}, map[string]any{"host": host, "port": p})
	wantError(t, r, "network", fmt.Sprintf("the code had more than %d connections open at once (the limit of a python tool); close the ones it no longer needs", capN))
}
