package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// connectRunner reads one "host:port" line from fd 3, tries a TCP connection to it, and answers
// with what happened and how long it took.
const connectRunner = readLine + `
import json, socket, time
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
	sb, err := m.Start(ctx, Options{Args: []string{"/usr/bin/python3", "-I", "-c", connectRunner}, Limits: testLimits(), Network: true})
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
		counted, err := sb.NetworkCounters(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rejected := counted.Refused
		if !strings.HasPrefix(what, "ConnectionRefusedError") || secs > 2 || rejected == 0 {
			t.Errorf("%s: %s after %.1fs, %d packets rejected; want refused at once by the chain", name, what, secs, rejected)
		}
		if err := sb.Destroy(ctx); err != nil {
			t.Error(err)
		}
	}

	sb2, err := m.Start(ctx, Options{Args: []string{"/bin/sleep", "30"}, Limits: testLimits(), Network: true})
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
		"-A " + sb2.ID + " -p tcp -m connlimit --connlimit-above 64 --connlimit-mask 32 --connlimit-saddr -j REJECT --reject-with tcp-reset",
		"-A " + sb2.ID + " ! -p tcp -m connlimit --connlimit-above 64 --connlimit-mask 32 --connlimit-saddr -j REJECT --reject-with icmp-port-unreachable",
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
	input, _ := exec.Command("iptables", "-w", "-S", "INPUT").Output()
	forward, _ := exec.Command("iptables", "-w", "-S", "FORWARD").Output()
	nat, _ := exec.Command("iptables", "-w", "-t", "nat", "-S").Output()
	if strings.Count(string(input)+string(forward), "--comment "+sb2.ID) != 4 || strings.Count(string(nat), "--comment "+sb2.ID) != 1 {
		t.Errorf("hooks of %s:\n%s%s\n%s", sb2.ID, input, forward, nat)
	}
	if err := sb2.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	all, _ := exec.Command("iptables", "-w", "-S").Output()
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

// forwardingSettings reads every IPv4 forwarding setting of this network namespace, and
// conf.all's accept_redirects (which writing conf.all.forwarding would change too).
func forwardingSettings(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(ipv4Conf)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if v, err := readSysctl(filepath.Join(ipv4Conf, e.Name(), "forwarding")); err == nil {
			out[e.Name()] = v
		}
	}
	out["all accept_redirects"], _ = readSysctl(filepath.Join(ipv4Conf, "all", "accept_redirects"))
	return out
}

func setSysctl(t *testing.T, path, v string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
}

// addLink makes an interface (a veth pair whose peer is name+"p") that the test removes.
func addLink(t *testing.T, name string) {
	t.Helper()
	if out, err := exec.Command("ip", "link", "add", name, "type", "veth", "peer", "name", name+"p").CombinedOutput(); err != nil {
		t.Fatalf("ip link add %s: %v %s", name, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", name).Run() })
}

// rulesOf lists the iptables rules (filter and nat) that name one of words.
func rulesOf(t *testing.T, words ...string) []string {
	t.Helper()
	var out []string
	for _, table := range []string{"filter", "nat"} {
		b, err := exec.Command("iptables", "-w", "-t", table, "-S").Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			for _, w := range words {
				if strings.Contains(line, w) {
					out = append(out, table+": "+line)
					break
				}
			}
		}
	}
	return out
}

// TestNetworkForwardingOnlyForSandboxes: on a machine that doesn't forward IPv4, a network
// sandbox reaches its server through the host, but the host forwards nothing else while it
// exists (a packet between two other namespaces routed through the host doesn't pass), and once
// the sandbox and its manager are closed every forwarding setting is as it was and no rule of
// toolhost's is left. On a machine that forwards already, nothing is changed. It runs in a
// network namespace of its own, so it sees and changes only its own settings.
func TestNetworkForwardingOnlyForSandboxes(t *testing.T) {
	if runInOwnNetns(t) {
		return
	}
	ctx := context.Background()
	a, b := newLab(t, false), newLab(t, false)
	bServer := serveIn(t, b.nsPath(), b.nsIP.String()+":0", "lab server")
	addLink(t, "thfwdwason") // forwarded before: stays so
	// A new namespace starts with the host's conf.all and conf.default, and writing conf.all
	// sets every interface only when its value changes: 1 then 0 turns forwarding off everywhere.
	setSysctl(t, filepath.Join(ipv4Conf, "all", "forwarding"), "1")
	setSysctl(t, filepath.Join(ipv4Conf, "all", "forwarding"), "0")
	setSysctl(t, filepath.Join(ipv4Conf, "default", "forwarding"), "0")
	setSysctl(t, filepath.Join(ipv4Conf, "all", "accept_redirects"), "0")
	setSysctl(t, filepath.Join(ipv4Conf, "thfwdwason", "forwarding"), "1")
	before := forwardingSettings(t)
	if err := dialFrom(a.nsPath(), bServer.addr, 2*time.Second); err == nil {
		t.Fatal("the lab forwards between its namespaces before any sandbox: the test can't tell")
	}

	m := newTestManager(t, NetworkOptions{ExtraAllowedCIDRs: []netip.Prefix{b.net}})
	what, _, sb := connectFrom(t, m, func(*Sandbox) string { return bServer.addr })
	if what != "connected: lab server" {
		t.Errorf("the sandbox didn't reach its allowed server: %s", what)
	}
	if v, _ := readSysctl(filepath.Join(ipv4Conf, "all", "forwarding")); v != "0" {
		t.Errorf("net.ipv4.ip_forward = %s while a sandbox exists; want it left at 0", v)
	}
	addLink(t, "thfwdnew") // made while forwarding is on: back to conf.default's 0 after
	if err := dialFrom(a.nsPath(), bServer.addr, 3*time.Second); err == nil {
		t.Error("while a network sandbox exists, the host forwards traffic between two other namespaces")
	}

	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	after := forwardingSettings(t)
	for k, v := range before {
		if _, still := after[k]; still && after[k] != v {
			t.Errorf("%s: forwarding %s before, %s after", k, v, after[k])
		}
	}
	if after["thfwdnew"] != "0" {
		t.Errorf("an interface made while a sandbox existed forwards after: %s", after["thfwdnew"])
	}
	if left := rulesOf(t, forwardChain, forwardedBefore, notForwardedBefore, sb.ID); len(left) > 0 {
		t.Errorf("rules left after the last sandbox:\n%s", strings.Join(left, "\n"))
	}
	if err := dialFrom(a.nsPath(), bServer.addr, 2*time.Second); err == nil {
		t.Error("the host forwards between other namespaces after the sandbox is gone")
	}

	// A machine that forwards already (a router, docker): nothing changes, nothing is added.
	setSysctl(t, filepath.Join(ipv4Conf, "all", "forwarding"), "1")
	before = forwardingSettings(t)
	m = newTestManager(t, NetworkOptions{ExtraAllowedCIDRs: []netip.Prefix{b.net}})
	what, _, sb = connectFrom(t, m, func(*Sandbox) string { return bServer.addr })
	if what != "connected: lab server" {
		t.Errorf("the sandbox didn't reach its allowed server on a forwarding machine: %s", what)
	}
	if left := rulesOf(t, forwardChain); len(left) > 0 {
		t.Errorf("a guard on a machine that forwards already:\n%s", strings.Join(left, "\n"))
	}
	if err := dialFrom(a.nsPath(), bServer.addr, 5*time.Second); err != nil {
		t.Errorf("a forwarding machine stopped forwarding for others while a sandbox exists: %v", err)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	after = forwardingSettings(t)
	for k, v := range before {
		if _, still := after[k]; still && after[k] != v {
			t.Errorf("forwarding machine: %s: %s before, %s after", k, v, after[k])
		}
	}

	// A crash: the process dies with a network up; a sweep removes the sandbox's rules, links
	// and namespace, and RestoreForwarding then puts the settings back.
	setSysctl(t, filepath.Join(ipv4Conf, "all", "forwarding"), "0")
	setSysctl(t, filepath.Join(ipv4Conf, "thfwdwason", "forwarding"), "1")
	before = forwardingSettings(t)
	newNet := func() *sandboxNet {
		id, err := NewID(testEnv.Prefix)
		if err != nil {
			t.Fatal(err)
		}
		n, err := setupNetwork(ctx, id, NetworkOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.teardown(ctx) })
		return n
	}
	crashed := newNet()
	if len(rulesOf(t, forwardChain)) == 0 {
		t.Fatal("no guard chain while a network exists on a machine that doesn't forward")
	}
	_ = exec.Command("ip", "link", "del", crashed.hostIf).Run()
	_ = exec.Command("ip", "netns", "del", crashed.id).Run()
	if err := errors.Join(removeRulesTagged(ctx, func(c string) bool { return c == crashed.id }),
		removeChains(ctx, func(c string) bool { return c == crashed.id })); err != nil {
		t.Fatal(err)
	}
	if err := RestoreForwarding(ctx); err != nil {
		t.Fatal(err)
	}
	after = forwardingSettings(t)
	for k, v := range before {
		if _, still := after[k]; still && after[k] != v {
			t.Errorf("after a crash and RestoreForwarding: %s: %s before, %s after", k, v, after[k])
		}
	}
	if left := rulesOf(t, forwardChain, forwardedBefore, notForwardedBefore); len(left) > 0 {
		t.Errorf("rules left after a crash and RestoreForwarding:\n%s", strings.Join(left, "\n"))
	}

	// Someone turns forwarding on for the whole machine while sandboxes exist (docker starts):
	// the guard goes at the next sandbox, and forwarding stays on after the last.
	first := newNet()
	setSysctl(t, filepath.Join(ipv4Conf, "all", "forwarding"), "1")
	second := newNet()
	if left := rulesOf(t, forwardChain); len(left) > 0 {
		t.Errorf("the guard stays after the machine turned forwarding on:\n%s", strings.Join(left, "\n"))
	}
	if err := errors.Join(first.teardown(ctx), second.teardown(ctx)); err != nil {
		t.Fatal(err)
	}
	if v, _ := readSysctl(filepath.Join(ipv4Conf, "all", "forwarding")); v != "1" {
		t.Errorf("forwarding the machine turned on was turned off: ip_forward = %s", v)
	}
	if err := dialFrom(a.nsPath(), bServer.addr, 5*time.Second); err != nil {
		t.Errorf("the machine doesn't forward after the sandboxes went: %v", err)
	}
}

// TestNetworkHasNoIPv6: a network sandbox's namespace has IPv6 off (no address, not even ::1)
// and so has the host's end of its veth; from inside, IPv6 connections to a lab server that
// listens on IPv6 fail while IPv4 to the same server works.
func TestNetworkHasNoIPv6(t *testing.T) {
	t.Parallel()
	l := newLab(t, true)
	srv := serveIn(t, l.nsPath(), ":0", "dual-stack lab server")
	_, port, _ := net.SplitHostPort(srv.addr)
	m := newTestManager(t, NetworkOptions{ExtraAllowedCIDRs: []netip.Prefix{l.net}})
	code := fmt.Sprintf(`
import socket
def attempt(family, addr):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect(addr)
        return "connected: " + s.recv(100).decode()
    except OSError as e:
        return "%%s errno %%s" %% (type(e).__name__, e.errno)
    finally:
        s.close()
out["v4"] = attempt(socket.AF_INET, (%q, %s))
out["v6 lab"] = attempt(socket.AF_INET6, (%q, %s))
out["v6 lab host side"] = attempt(socket.AF_INET6, (%q, %s))
`, l.nsIP, port, l.nsIP6, port, l.hostIP6, port)
	var got map[string]string
	sb := runCode(t, m, true, code, &got)
	t.Logf("from inside the sandbox: %v", got)
	if got["v4"] != "connected: dual-stack lab server" {
		t.Errorf("IPv4 to the lab server: %s", got["v4"])
	}
	for _, k := range []string{"v6 lab", "v6 lab host side"} {
		if strings.HasPrefix(got[k], "connected") {
			t.Errorf("IPv6 from the sandbox: %s: %s", k, got[k])
		}
	}
	if out, err := exec.Command("ip", "-n", sb.ID, "-6", "addr", "show").CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("the sandbox's namespace has IPv6 addresses: %s %v", out, err)
	}
	if err := inNetns(sb.net.NSPath(), func() error {
		for _, c := range []string{"all", "default", "lo", sb.net.sbIf} {
			if v, err := readSysctl(filepath.Join(ipv6Conf, c, "disable_ipv6")); v != "1" {
				t.Errorf("in the namespace, %s disable_ipv6 = %q %v; want 1", c, v, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if v, err := readSysctl(filepath.Join(ipv6Conf, sb.net.hostIf, "disable_ipv6")); v != "1" {
		t.Errorf("the host's end of the veth: disable_ipv6 = %q %v; want 1", v, err)
	}
	if err := sb.Destroy(context.Background()); err != nil {
		t.Error(err)
	}
}

// TestNetworkConnectionCap: a sandbox that opens more connections than its cap gets the first
// ones, and the ones past the cap refused at once; the refusals are counted as over the cap, not
// as refused destinations.
func TestNetworkConnectionCap(t *testing.T) {
	t.Parallel()
	l := newLab(t, false)
	srv := serveIn(t, l.nsPath(), l.nsIP.String()+":0", "x")
	host, port, _ := net.SplitHostPort(srv.addr)
	const limit, tries = 4, 9
	m := newTestManager(t, NetworkOptions{ExtraAllowedCIDRs: []netip.Prefix{l.net}, MaxConnections: limit})
	code := fmt.Sprintf(`
import socket
held, out["results"] = [], []
for i in range(%d):
    try:
        held.append(socket.create_connection((%q, %s), timeout=10))
        out["results"].append("ok")
    except OSError as e:
        out["results"].append(type(e).__name__)
`, tries, host, port)
	var got struct{ Results []string }
	sb := runCode(t, m, true, code, &got)
	want := make([]string, tries)
	for i := range want {
		want[i] = "ConnectionRefusedError"
		if i < limit {
			want[i] = "ok"
		}
	}
	if !slices.Equal(got.Results, want) {
		t.Errorf("connections with a cap of %d: %v; want %v", limit, got.Results, want)
	}
	c, err := sb.NetworkCounters(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c.OverConnLimit < tries-limit || c.Refused != 0 {
		t.Errorf("counters %+v; want %d or more over the cap and none refused", c, tries-limit)
	}
	if err := sb.Destroy(context.Background()); err != nil {
		t.Error(err)
	}
}
