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
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// addHostAddr adds a random address of 100.87.0.0/16 to this machine (on lo, labelled, as the
// egress proxy does: this kernel may have no dummy interfaces), removed when the test ends.
func addHostAddr(t *testing.T) netip.Addr {
	t.Helper()
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	addr := netip.AddrFrom4([4]byte{100, 87, b[3], 1 + b[4]%254})
	args := []string{"ip", "addr", "add", addr.String() + "/32", "dev", "lo", "label", "lo:thtd" + hex.EncodeToString(b[:3])}
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%v: %v %s", args, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "addr", "del", addr.String()+"/32", "dev", "lo").Run() })
	return addr
}

// attemptsRunner reads a JSON object {name: [host, port]} from fd 3, tries a TCP connection to
// each, and a name lookup, and answers with what happened to each.
const attemptsRunner = readLine + `
import json, socket
out = {}
for name, (host, port) in json.loads(line).items():
    try:
        s = socket.create_connection((host, port), timeout=5)
        s.settimeout(5)
        out[name] = "connected: " + s.recv(100).decode(errors="replace")
        s.close()
    except OSError as e:
        out[name] = "%s errno %s" % (type(e).__name__, e.errno)
try:
    out["dns"] = "resolved: %s" % socket.getaddrinfo("pypi.org", 443)[0][4][0]
except OSError as e:
    out["dns"] = "%s" % type(e).__name__
f.write((json.dumps(out) + "\n").encode())
`

// TestNetworkOnlyToReachesOnlyTheProxy: a packages-mode sandbox (NetworkOptions.OnlyTo) reaches
// the proxy's address and port and nothing else: not another port of that address, not the
// host side of its veth nor the host's other addresses (where a server listens on every
// address), not a server in another namespace, not another sandbox, not a public address, and no
// name resolves. The refusals are the chain's, counted; its chain is the short one; it has no NAT
// rule.
func TestNetworkOnlyToReachesOnlyTheProxy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	proxyIP := addHostAddr(t)
	proxy := serve(t, listen(t, proxyIP.String()+":0"), "proxy")
	other := serve(t, listen(t, proxyIP.String()+":0"), "another port")
	everywhere := serve(t, listen(t, "0.0.0.0:0"), "host service")
	l := newLab(t, false)
	labSrv := serveIn(t, l.nsPath(), l.nsIP.String()+":0", "lab server")
	proxyAddr := netip.MustParseAddrPort(proxy.addr)

	m := newTestManager(t, NetworkOptions{OnlyTo: proxyAddr, ExtraAllowedCIDRs: []netip.Prefix{l.net}})
	// Another packages-mode sandbox, listening.
	peer, err := m.Start(ctx, Options{Args: []string{"/usr/bin/python3", "-I", "-c", `
import socket
s = socket.socket()
s.bind(("0.0.0.0", 8000))
s.listen()
while True:
    c, _ = s.accept()
    c.sendall(b"peer")
`}, Limits: testLimits(), Network: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = peer.Destroy(ctx) }()

	sb, err := m.Start(ctx, Options{Args: []string{"/usr/bin/python3", "-I", "-c", attemptsRunner}, Limits: testLimits(), Network: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sb.Destroy(ctx) }()
	hp := func(addr string) [2]any {
		h, p, _ := net.SplitHostPort(addr)
		n, _ := strconv.Atoi(p)
		return [2]any{h, n}
	}
	_, everyPort, _ := net.SplitHostPort(everywhere.addr)
	targets := map[string][2]any{
		"proxy":           hp(proxy.addr),
		"other port":      hp(other.addr),
		"veth host side":  hp(net.JoinHostPort(sb.net.hostIP.String(), everyPort)),
		"lab server":      hp(labSrv.addr),
		"peer sandbox":    {peer.net.sbIP.String(), 8000},
		"public address":  {"1.1.1.1", 443},
		"proxy port, lab": {l.nsIP.String(), int(proxyAddr.Port())},
	}
	if a := hostAddress(t); a != "" {
		targets["host address"] = hp(net.JoinHostPort(a, everyPort))
	}
	req, _ := json.Marshal(targets)
	if _, err := sb.Control.Write(append(req, '\n')); err != nil {
		t.Fatal(err)
	}
	_ = sb.Control.SetReadDeadline(time.Now().Add(90 * time.Second))
	line, err := bufio.NewReader(sb.Control).ReadBytes('\n')
	if err != nil {
		t.Fatalf("no answer from the sandbox: %v", err)
	}
	var got map[string]string
	if err := json.Unmarshal(line, &got); err != nil {
		t.Fatalf("the sandbox's answer %q: %v", line, err)
	}
	t.Logf("from inside the packages-mode sandbox: %v", got)
	if got["proxy"] != "connected: proxy" {
		t.Errorf("the sandbox didn't reach the proxy: %s", got["proxy"])
	}
	for name := range targets {
		if name != "proxy" && strings.HasPrefix(got[name], "connected") {
			t.Errorf("a packages-mode sandbox reached %s: %s", name, got[name])
		}
	}
	// What the sandbox has a route to (the proxy's address, its /30) the chain refuses; the
	// sandbox has no route anywhere else.
	for _, name := range []string{"other port", "veth host side"} {
		if !strings.HasPrefix(got[name], "ConnectionRefusedError") {
			t.Errorf("%s: %s; want refused at once by the chain", name, got[name])
		}
	}
	for _, name := range []string{"lab server", "peer sandbox", "public address", "proxy port, lab", "host address"} {
		if v, ok := got[name]; ok && v != "OSError errno 101" && !strings.HasPrefix(v, "ConnectionRefusedError") {
			t.Errorf("%s: %s; want network unreachable (errno 101) or refused, at once", name, v)
		}
	}
	if !strings.HasPrefix(got["dns"], "gaierror") {
		t.Errorf("a name resolved inside a packages-mode sandbox: %s", got["dns"])
	}
	c, err := sb.NetworkCounters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.Refused < 2 {
		t.Errorf("the chain counted %d refusals; want one for each refused destination", c.Refused)
	}

	rules, err := exec.Command("iptables", "-w", "-S", sb.ID).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"-N " + sb.ID,
		"-A " + sb.ID + " -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
		"-A " + sb.ID + " -p tcp -m connlimit --connlimit-above 64 --connlimit-mask 32 --connlimit-saddr -j REJECT --reject-with tcp-reset",
		fmt.Sprintf("-A %s -d %s/32 -p tcp -m tcp --dport %d -j ACCEPT", sb.ID, proxyIP, proxyAddr.Port()),
		"-A " + sb.ID + " -p tcp -j REJECT --reject-with tcp-reset",
		"-A " + sb.ID + " -j REJECT --reject-with icmp-port-unreachable",
	}
	if g := strings.TrimSpace(string(rules)); g != strings.Join(want, "\n") {
		t.Errorf("the packages-mode chain:\n%s\nwant:\n%s", g, strings.Join(want, "\n"))
	}
	// A sandbox with web network doesn't reach the proxy either: it is an address of this machine.
	web := newTestManager(t, NetworkOptions{})
	what, _, wsb := connectFrom(t, web, func(*Sandbox) string { return proxy.addr })
	if !strings.HasPrefix(what, "ConnectionRefusedError") {
		t.Errorf("a sandbox with web network reached the package proxy: %s", what)
	}
	_ = wsb.Destroy(ctx)

	if nat, _ := exec.Command("iptables", "-w", "-t", "nat", "-S").Output(); strings.Contains(string(nat), sb.ID) {
		t.Errorf("a packages-mode sandbox has NAT rules:\n%s", nat)
	}
	if routes, err := exec.Command("ip", "-n", sb.ID, "route", "show").Output(); err != nil || strings.Contains(string(routes), "default") {
		t.Errorf("a packages-mode sandbox's routes: %s %v; want none but its /30 and the proxy's address", routes, err)
	}
}

// TestNetworkOnlyToNeedsAHostAddress: a packages-mode sandbox whose proxy address is not an
// address of this machine (or is loopback, or not IPv4) is not started, and the error says why.
func TestNetworkOnlyToNeedsAHostAddress(t *testing.T) {
	t.Parallel()
	for to, want := range map[string]string{
		"100.87.255.253:3128": "is not an address of this machine",
		"127.0.0.1:3128":      "which a sandbox can't reach",
		"[fd00::1]:3128":      "is not an IPv4 address and port",
	} {
		m := newTestManager(t, NetworkOptions{OnlyTo: netip.MustParseAddrPort(to)})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		sb, err := m.Start(ctx, Options{Args: []string{"/bin/true"}, Limits: testLimits(), Network: true})
		cancel()
		if err == nil {
			_ = sb.Destroy(context.Background())
			t.Errorf("a packages-mode sandbox started with its proxy at %s", to)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("proxy at %s: %v; want it to say %q", to, err, want)
		}
	}
}

func listen(t *testing.T, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return ln
}
