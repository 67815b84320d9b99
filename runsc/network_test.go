package runsc

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// connectRunner reads one "host:port" line from fd 3, tries a TCP connection to it, and answers
// with what happened and how long it took.
const connectRunner = `
import json, os, socket, time
f = os.fdopen(3, "r+b", buffering=0)
line = b""
while not line.endswith(b"\n"):
    c = f.read(1)
    if not c:
        break
    line += c
host, port = line.decode().strip().rsplit(":", 1)
t0 = time.monotonic()
try:
    s = socket.create_connection((host, int(port)), timeout=5)
    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    what = "connected: " + s.recv(100).decode(errors="replace")
except OSError as e:
    what = "%s errno %s" % (type(e).__name__, e.errno)
f.write((json.dumps({"what": what, "seconds": time.monotonic() - t0}) + "\n").encode())
`

func connectFrom(t *testing.T, m *Manager, addr func(sb *Sandbox) string) (what string, seconds float64, sb *Sandbox) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := m.Prepare(ctx, SandboxOptions{Args: []string{"/usr/bin/python3", "-I", "-c", connectRunner}, Limits: testLimits(), Network: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Control.Write([]byte(addr(sb) + "\n")); err != nil {
		t.Fatal(err)
	}
	_ = sb.Control.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReader(sb.Control).ReadBytes('\n')
	if err != nil {
		t.Fatalf("no answer from the sandbox: %v", err)
	}
	var a struct {
		What    string  `json:"what"`
		Seconds float64 `json:"seconds"`
	}
	if err := json.Unmarshal(line, &a); err != nil {
		t.Fatal(err)
	}
	return a.What, a.Seconds, sb
}

// TestNetworkRules: a network sandbox gets a chain that refuses the host's own addresses at once
// (counted), admits an extra allowed range, and leaves nothing behind when it is closed.
func TestNetworkRules(t *testing.T) {
	t.Parallel()
	extra := netip.MustParsePrefix("198.51.100.0/24")
	m := newTestManager(t, NetworkOptions{ExtraAllowedCIDRs: []netip.Prefix{extra}})
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("host service"))
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port

	ctx := context.Background()
	// The host's own addresses, the host side of the sandbox's veth among them, are refused at
	// once, and the refusals are counted.
	hostAddrs := map[string]func(*Sandbox) string{
		"veth host side": func(sb *Sandbox) string { return net.JoinHostPort(sb.net.hostIP.String(), strconv.Itoa(port)) },
	}
	if a := hostAddress(t); a != "" {
		hostAddrs["host address "+a] = func(*Sandbox) string { return net.JoinHostPort(a, strconv.Itoa(port)) }
	}
	for name, addr := range hostAddrs {
		what, secs, sb := connectFrom(t, m, addr)
		rejected, err := sb.NetworkRejected(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(what, "ConnectionRefusedError") || secs > 2 || rejected == 0 {
			t.Errorf("%s: %s after %.1fs, %d packets rejected; want refused at once by the chain", name, what, secs, rejected)
		}
		if err := sb.Close(ctx); err != nil {
			t.Error(err)
		}
	}

	sb2, err := m.Prepare(ctx, SandboxOptions{Args: []string{"/bin/sleep", "30"}, Limits: testLimits(), Network: true})
	if err != nil {
		t.Fatal(err)
	}
	rules, err := exec.Command("iptables", "-w", "-S", sb2.ID).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"-N " + sb2.ID,
		"-A " + sb2.ID + " -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
		"-A " + sb2.ID + " -m addrtype --dst-type LOCAL -j REJECT --reject-with icmp-port-unreachable",
		"-A " + sb2.ID + " -d 127.0.0.0/8 -j REJECT --reject-with icmp-port-unreachable",
		"-A " + sb2.ID + " -d 169.254.0.0/16 -j REJECT --reject-with icmp-port-unreachable",
		"-A " + sb2.ID + " -d 224.0.0.0/4 -j REJECT --reject-with icmp-port-unreachable",
		"-A " + sb2.ID + " -d 198.51.100.0/24 -j ACCEPT",
		"-A " + sb2.ID + " -d 0.0.0.0/8 -j REJECT --reject-with icmp-port-unreachable",
	}
	got := strings.Split(strings.TrimSpace(string(rules)), "\n")
	for i, w := range want {
		if i >= len(got) || got[i] != w {
			t.Fatalf("chain rule %d = %q; want %q\nall:\n%s", i, at(got, i), w, rules)
		}
	}
	tail := got[len(got)-3:]
	if tail[0] != "-A "+sb2.ID+" -p tcp -m multiport --dports 80,443 -j ACCEPT" ||
		tail[1] != "-A "+sb2.ID+" -p tcp -j REJECT --reject-with tcp-reset" ||
		tail[2] != "-A "+sb2.ID+" -j REJECT --reject-with icmp-port-unreachable" {
		t.Errorf("the chain doesn't end with 80/443 then reject:\n%s", rules)
	}
	all, _ := exec.Command("iptables", "-w", "-S").Output()
	nat, _ := exec.Command("iptables", "-w", "-t", "nat", "-S").Output()
	if strings.Count(string(all), "--comment "+sb2.ID) != 4 || strings.Count(string(nat), "--comment "+sb2.ID) != 1 {
		t.Errorf("hooks of %s:\n%s\n%s", sb2.ID, all, nat)
	}
	if err := sb2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	all, _ = exec.Command("iptables", "-w", "-S").Output()
	nat, _ = exec.Command("iptables", "-w", "-t", "nat", "-S").Output()
	if strings.Contains(string(all)+string(nat), sb2.ID) {
		t.Errorf("rules of a closed sandbox are left:\n%s\n%s", all, nat)
	}
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), sb2.ID) {
		t.Errorf("the namespace of a closed sandbox is left: %s", out)
	}
}

// hostAddress returns a global IPv4 address of this machine other than loopback, or "".
func hostAddress(t *testing.T) string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil && ip.IP.IsGlobalUnicast() && !strings.HasPrefix(ip.IP.String(), "100.") {
			return ip.IP.String()
		}
	}
	return ""
}

func at(list []string, i int) string {
	if i < len(list) {
		return list[i]
	}
	return ""
}
