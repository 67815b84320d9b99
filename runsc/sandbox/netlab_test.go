package sandbox

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A lab is a network namespace of the test's own, joined to the host by a veth pair: IPv4
// 10.x.y.0/24 (host side .1, namespace side .2, the namespace's default route via .1) and, when
// asked, IPv6 fdXX:XXXX:XXXX::/64 (::1 and ::2). Tests reach "outside" servers only there.
type lab struct {
	ns, hostIf, nsIf string
	net              netip.Prefix
	hostIP, nsIP     netip.Addr
	hostIP6, nsIP6   netip.Addr // zero without IPv6
}

func (l *lab) nsPath() string { return "/var/run/netns/" + l.ns }

// randomLabNet picks a 10.x.y.0/24 no interface (of this network namespace) uses.
func randomLabNet() netip.Prefix {
	out, _ := exec.Command("ip", "-o", "-4", "addr", "show").Output()
	for {
		b := make([]byte, 2)
		_, _ = rand.Read(b)
		p := netip.MustParsePrefix(fmt.Sprintf("10.%d.%d.0/24", 200+int(b[0])%50, b[1]))
		if !strings.Contains(string(out), " "+strings.TrimSuffix(p.Addr().String(), ".0")+".") {
			return p
		}
	}
}

func newLab(t *testing.T, ipv6 bool) *lab {
	t.Helper()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	tag := hex.EncodeToString(b[:3])
	subnet := randomLabNet()
	base := subnet.Addr().As4()
	l := &lab{ns: "thlab" + tag, hostIf: "thlab" + tag + "h", nsIf: "thlab" + tag + "n", net: subnet,
		hostIP: netip.AddrFrom4([4]byte{base[0], base[1], base[2], 1}),
		nsIP:   netip.AddrFrom4([4]byte{base[0], base[1], base[2], 2})}
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "del", l.hostIf).Run()
		_ = exec.Command("ip", "netns", "del", l.ns).Run()
	})
	cmds := [][]string{
		{"ip", "netns", "add", l.ns},
		{"ip", "link", "add", l.hostIf, "type", "veth", "peer", "name", l.nsIf, "netns", l.ns},
		{"ip", "addr", "add", l.hostIP.String() + "/24", "dev", l.hostIf},
		{"ip", "link", "set", l.hostIf, "up"},
		{"ip", "-n", l.ns, "addr", "add", l.nsIP.String() + "/24", "dev", l.nsIf},
		{"ip", "-n", l.ns, "link", "set", l.nsIf, "up"},
		{"ip", "-n", l.ns, "link", "set", "lo", "up"},
		{"ip", "-n", l.ns, "route", "add", "default", "via", l.hostIP.String()},
	}
	if ipv6 {
		var a [16]byte
		a[0] = 0xfd
		copy(a[1:6], b[3:8])
		a[15] = 1
		l.hostIP6 = netip.AddrFrom16(a)
		a[15] = 2
		l.nsIP6 = netip.AddrFrom16(a)
		cmds = append(cmds,
			[]string{"ip", "-6", "addr", "add", l.hostIP6.String() + "/64", "dev", l.hostIf, "nodad"},
			[]string{"ip", "-n", l.ns, "-6", "addr", "add", l.nsIP6.String() + "/64", "dev", l.nsIf, "nodad"},
		)
	}
	for _, c := range cmds {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v %s", c, err, out)
		}
	}
	return l
}

// server accepts connections on ln, greets each with greeting and holds it open until the test
// ends.
type server struct {
	addr  string
	mu    sync.Mutex
	conns []net.Conn
}

func serve(t *testing.T, ln net.Listener, greeting string) *server {
	t.Helper()
	s := &server{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(greeting))
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range s.conns {
			c.Close()
		}
	})
	return s
}

// serveIn starts a server on addr inside the network namespace at nsPath.
func serveIn(t *testing.T, nsPath, addr, greeting string) *server {
	t.Helper()
	var ln net.Listener
	if err := inNetns(nsPath, func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return serve(t, ln, greeting)
}

// dialFrom tries a TCP connection to addr from inside the network namespace at nsPath and
// returns nil if it was made.
func dialFrom(nsPath, addr string, timeout time.Duration) error {
	var c net.Conn
	err := inNetns(nsPath, func() (err error) {
		c, err = net.DialTimeout("tcp", addr, timeout)
		return err
	})
	if c != nil {
		c.Close()
	}
	return err
}

// codeRunner runs, inside a sandbox, the Python code it reads as one JSON string line from fd 3,
// with a dict `out` in scope, and answers with `out` as JSON.
const codeRunner = readLine + `
import json
out = {}
exec(json.loads(line), {"out": out})
f.write((json.dumps(out) + "\n").encode())
`

// runCode prepares a sandbox running codeRunner, hands it code, and decodes its answer into v.
// The sandbox is left open for the caller to inspect and close.
func runCode(t *testing.T, m *Manager, network bool, code string, v any) *Sandbox {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := m.Start(ctx, Options{Args: []string{"/usr/bin/python3", "-I", "-c", codeRunner}, Limits: testLimits(), Network: network})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Destroy(context.Background()) })
	req, _ := json.Marshal(code)
	if _, err := sb.Control.Write(append(req, '\n')); err != nil {
		t.Fatal(err)
	}
	_ = sb.Control.SetReadDeadline(time.Now().Add(90 * time.Second))
	line, err := bufio.NewReader(sb.Control).ReadBytes('\n')
	if err != nil {
		t.Fatalf("no answer from the sandbox: %v", err)
	}
	if err := json.Unmarshal(line, v); err != nil {
		t.Fatalf("the sandbox's answer %q: %v", line, err)
	}
	return sb
}

// inOwnNetnsEnv tells a test binary it was started by runInOwnNetns.
const inOwnNetnsEnv = "TOOLHOST_TEST_IN_OWN_NETNS"

// runInOwnNetns runs the calling test again, alone, in a child test process with a network
// namespace of its own (loopback only), and fails if the child fails. It returns false in the
// child, where the test goes on to do its work: there, machine-wide network settings (sysctls,
// iptables) are the namespace's, apart from every other test and process on the machine.
func runInOwnNetns(t *testing.T) (parent bool) {
	t.Helper()
	if os.Getenv(inOwnNetnsEnv) != "" {
		if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
			t.Fatalf("ip link set lo up: %v %s", err, out)
		}
		return false
	}
	if testEnv.Skip != "" {
		t.Skip(testEnv.Skip)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v", "-test.timeout=8m")
	cmd.Env = append(os.Environ(), inOwnNetnsEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	out, err := cmd.CombinedOutput()
	t.Logf("the test in a network namespace of its own:\n%s", out)
	if err != nil {
		t.Fatalf("it failed: %v", err)
	}
	return true
}
