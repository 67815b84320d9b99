package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// randomLabNet picks a 10.x.y.0/24 no interface of this machine uses.
func randomLabNet() netip.Prefix {
	return randomUnused(func(b []byte) netip.Prefix {
		return netip.MustParsePrefix(fmt.Sprintf("10.%d.%d.0/24", 200+int(b[0])%50, b[1]))
	})
}

// randomLabRange picks a 10.x.0.0/16 no interface of this machine uses, for labOf to cut /24s
// from.
func randomLabRange() netip.Prefix {
	return randomUnused(func(b []byte) netip.Prefix {
		return netip.MustParsePrefix(fmt.Sprintf("10.%d.0.0/16", 200+int(b[0])%50))
	})
}

// randomUnused draws prefixes until one shares no address with an interface of this machine.
func randomUnused(draw func(random []byte) netip.Prefix) netip.Prefix {
	out, _ := exec.Command("ip", "-o", "-4", "addr", "show").Output()
	for {
		b := make([]byte, 2)
		_, _ = rand.Read(b)
		p := draw(b)
		four := p.Addr().As4()
		shared := fmt.Sprintf(" %d.%d.%d.", four[0], four[1], four[2])
		if p.Bits() == 16 {
			shared = fmt.Sprintf(" %d.%d.", four[0], four[1])
		}
		if !strings.Contains(string(out), shared) {
			return p
		}
	}
}

// labOf is the n-th /24 of a /16 from randomLabRange. Labs that run at once each need their own:
// two on one subnet leave the host one route, to whichever came first, and a connection meant
// for the other is refused there.
func labOf(r netip.Prefix, n int) netip.Prefix {
	four := r.Addr().As4()
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{four[0], four[1], byte(n), 0}), 24)
}

// lab is a network namespace of the test's own, joined to the host by a veth pair on the lab
// subnet: the host side has .1, the namespace side .2.
type lab struct {
	ns, hostIf   string
	hostIP, nsIP netip.Addr
}

func newLab(t *testing.T, subnet netip.Prefix) *lab {
	t.Helper()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	tag := hex.EncodeToString(b)
	base := subnet.Addr().As4()
	l := &lab{ns: "thlab" + tag, hostIf: "thlab" + tag + "h",
		hostIP: netip.AddrFrom4([4]byte{base[0], base[1], base[2], 1}),
		nsIP:   netip.AddrFrom4([4]byte{base[0], base[1], base[2], 2})}
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "del", l.hostIf).Run()
		_ = exec.Command("ip", "netns", "del", l.ns).Run()
	})
	for _, c := range [][]string{
		{"ip", "netns", "add", l.ns},
		{"ip", "link", "add", l.hostIf, "type", "veth", "peer", "name", "thlab" + tag + "n", "netns", l.ns},
		{"ip", "addr", "add", l.hostIP.String() + "/24", "dev", l.hostIf},
		{"ip", "link", "set", l.hostIf, "up"},
		{"ip", "-n", l.ns, "addr", "add", l.nsIP.String() + "/24", "dev", "thlab" + tag + "n"},
		{"ip", "-n", l.ns, "link", "set", "thlab" + tag + "n", "up"},
		{"ip", "-n", l.ns, "link", "set", "lo", "up"},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v %s", c, err, out)
		}
	}
	return l
}

// openLab is a lab the open kind may reach, on a /24 of its own.
func openLab(t *testing.T) *lab {
	t.Helper()
	return newLab(t, labOf(env.labRange, int(env.labs.Add(1))))
}

// serveInNS starts an HTTP server answering body on the lab namespace's address.
func (l *lab) serveInNS(t *testing.T, body string) string {
	t.Helper()
	ln, err := listenInNetns("/var/run/netns/"+l.ns, l.nsIP.String()+":0")
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, ln, body)
}

// serve answers body over HTTP on ln until the test ends; it returns the address.
func serve(t *testing.T, ln net.Listener, body string) string {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(body))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// listenInNetns opens a TCP listener inside the network namespace at nsPath. The listening
// socket stays in that namespace after the thread returns to its own.
func listenInNetns(nsPath, addr string) (net.Listener, error) {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer orig.Close()
	target, err := os.Open(nsPath)
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("entering the lab namespace: %w", err)
	}
	ln, lerr := net.Listen("tcp", addr)
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// This thread is stuck in the lab namespace: leave it locked so it dies with the goroutine.
		return nil, fmt.Errorf("leaving the lab namespace: %w", err)
	}
	runtime.UnlockOSThread()
	return ln, lerr
}
