package session

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// addHostAddr adds a random address of 100.87.0.0/16 to lo, as the egress proxy does, removed
// when the test ends.
func addHostAddr(t *testing.T) netip.Addr {
	t.Helper()
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	addr := netip.AddrFrom4([4]byte{100, 87, b[3], 1 + b[4]%254})
	args := []string{"ip", "addr", "add", addr.String() + "/32", "dev", "lo", "label", "lo:thss" + hex.EncodeToString(b[:3])}
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%v: %v %s", args, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "addr", "del", addr.String()+"/32", "dev", "lo").Run() })
	return addr
}

// fakeProxy answers every HTTP request with what it asked, and records the requests' heads.
type fakeProxy struct {
	l    net.Listener
	mu   sync.Mutex
	seen []string
}

func newFakeProxy(t *testing.T, addr string) *fakeProxy {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	p := &fakeProxy{l: l}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(30 * time.Second))
				r := bufio.NewReader(c)
				var head []string
				for {
					line, err := r.ReadString('\n')
					if err != nil || line == "\r\n" {
						break
					}
					head = append(head, strings.TrimSpace(line))
				}
				p.mu.Lock()
				p.seen = append(p.seen, strings.Join(head, "\n"))
				p.mu.Unlock()
				first := ""
				if len(head) > 0 {
					first = head[0]
				}
				_, _ = c.Write([]byte("HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nproxied " + first))
			}()
		}
	}()
	return p
}

func (p *fakeProxy) requests() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.seen, "\n---\n")
}

// TestPackagesModeReachesOnlyTheProxy: a session in packages mode gets a new sandbox on its
// files whose code finds the proxy in the usual variables (with the session's credentials) and
// reaches it, and nothing else: not another port of the proxy's address, not a public address.
// Without a proxy address the mode is refused with the reason.
func TestPackagesModeReachesOnlyTheProxy(t *testing.T) {
	ts := newSetup(t)
	addr := addHostAddr(t)
	proxy := newFakeProxy(t, addr.String()+":0")
	other := newFakeProxy(t, addr.String()+":0")
	m := ts.manager(t, Options{ProxyAddr: netip.MustParseAddrPort(proxy.l.Addr().String())})
	id := testID("packages")
	runOK(t, m, id, "bash", "echo here > f")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var o output
	res, err := m.Run(ctx, id, o.run(Run{Language: "python", Network: NetworkPackages, Timeout: time.Minute,
		ProxyURL: "http://" + id + ":tok3n@" + proxy.l.Addr().String(),
		Code: `
import os, socket, urllib.request
print(open("f").read().strip())
print(os.environ["HTTPS_PROXY"] == os.environ["http_proxy"] != "")
print(urllib.request.urlopen("http://pypi.example/simple/", timeout=10).read().decode())
for host, port in [("` + addr.String() + `", ` + portOf(other.l.Addr()) + `), ("1.1.1.1", 443)]:
    try:
        socket.create_connection((host, port), timeout=5)
        print("reached", host, port)
    except OSError as e:
        print("refused", host)
`}))
	if err != nil {
		t.Fatal(err)
	}
	want := "here\nTrue\nproxied GET http://pypi.example/simple/ HTTP/1.1\nrefused " + addr.String() + "\nrefused 1.1.1.1\n"
	if !res.Cold || o.stdout() != want {
		t.Errorf("a run in packages mode: %+v\nstdout %q\nstderr %q\nwant %q", res, o.stdout(), o.stderr(), want)
	}
	if !strings.Contains(proxy.requests(), "Proxy-Authorization: Basic ") {
		t.Errorf("the proxy saw no credentials:\n%s", proxy.requests())
	}
	if other.requests() != "" {
		t.Errorf("another port of the proxy's address was reached")
	}
}

func portOf(a net.Addr) string {
	_, p, _ := net.SplitHostPort(a.String())
	return p
}
