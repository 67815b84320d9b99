package egress

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// A lab is a network namespace of the test's own joined to this machine by a veth pair on
// 10.x.y.0/24: this machine's side has .1, the namespace's .2. The package servers the tests
// reach through the proxy listen there, on addresses the proxy reaches only through AllowAddrs.
type lab struct {
	ns, hostIf   string
	net          netip.Prefix
	hostIP, nsIP netip.Addr
}

func (l *lab) nsPath() string { return "/var/run/netns/" + l.ns }

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the egress proxy's tests make network namespaces: they need root")
	}
}

func newLab(t *testing.T) *lab {
	t.Helper()
	needRoot(t)
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	tag := hex.EncodeToString(b[:3])
	out, _ := exec.Command("ip", "-o", "-4", "addr", "show").Output()
	var subnet netip.Prefix
	for i := 0; ; i++ {
		_, _ = rand.Read(b[3:])
		subnet = netip.MustParsePrefix(fmt.Sprintf("10.%d.%d.0/24", 200+int(b[3])%50, b[4]))
		if !strings.Contains(string(out), " "+strings.TrimSuffix(subnet.Addr().String(), ".0")+".") {
			break
		}
	}
	base := subnet.Addr().As4()
	l := &lab{ns: "thelab" + tag, hostIf: "thelab" + tag + "h", net: subnet,
		hostIP: netip.AddrFrom4([4]byte{base[0], base[1], base[2], 1}),
		nsIP:   netip.AddrFrom4([4]byte{base[0], base[1], base[2], 2})}
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "del", l.hostIf).Run()
		_ = exec.Command("ip", "netns", "del", l.ns).Run()
	})
	nsIf := "thelab" + tag + "n"
	for _, c := range [][]string{
		{"ip", "netns", "add", l.ns},
		{"ip", "link", "add", l.hostIf, "type", "veth", "peer", "name", nsIf, "netns", l.ns},
		{"ip", "addr", "add", l.hostIP.String() + "/24", "dev", l.hostIf},
		{"ip", "link", "set", l.hostIf, "up"},
		{"ip", "-n", l.ns, "addr", "add", l.nsIP.String() + "/24", "dev", nsIf},
		{"ip", "-n", l.ns, "link", "set", nsIf, "up"},
		{"ip", "-n", l.ns, "link", "set", "lo", "up"},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v %s", c, err, out)
		}
	}
	return l
}

// listen opens a TCP listener on addr inside the lab's namespace; the socket stays there.
func (l *lab) listen(t *testing.T, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer orig.Close()
		target, err := os.Open(l.nsPath())
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		ln, err = net.Listen("tcp", addr)
		if serr := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); serr != nil {
			done <- errors.Join(err, serr) // the thread stays locked and ends with the goroutine
			return
		}
		runtime.UnlockOSThread()
		done <- err
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// fakeResolver answers names from a table; any other name doesn't resolve.
type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[strings.ToLower(strings.TrimSuffix(host, "."))]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// upstream records what reached a package server.
type upstream struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (u *upstream) record(r *http.Request) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.reqs = append(u.reqs, r)
}

func (u *upstream) all() []*http.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]*http.Request(nil), u.reqs...)
}

// rawProxyRequest sends req (a whole request) to the proxy over a new connection and reads the
// response's head.
func rawProxyRequest(t *testing.T, proxy netip.AddrPort, req string) *http.Response {
	t.Helper()
	c, err := net.Dial("tcp", proxy.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no response from the proxy to %q: %v", req, err)
	}
	return resp
}
