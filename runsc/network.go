package runsc

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// blockedRanges are the destinations a sandbox with network never reaches, whatever the port:
// "this network", private ranges, CGNAT, loopback, link-local (the cloud metadata address
// 169.254.169.254 among them), IETF and test ranges, benchmarking, multicast and reserved. The
// host's own addresses are refused too (addrtype LOCAL and the INPUT hook).
var blockedRanges = []string{
	"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
	"192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15",
	"198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
}

// alwaysBlockedRanges stay refused even when ExtraAllowedCIDRs name them: loopback, link-local
// (the cloud metadata address among them) and multicast. The host's own addresses are always
// refused too.
var alwaysBlockedRanges = []string{"127.0.0.0/8", "169.254.0.0/16", "224.0.0.0/4"}

// allowedPorts are the TCP ports of public addresses a sandbox with network reaches.
var allowedPorts = []int{80, 443}

// sandboxNetPool is where each sandbox's /30 (host side .1, sandbox side .2) comes from. It lies in
// CGNAT space, which sandboxes themselves may not reach.
var sandboxNetPool = netip.MustParsePrefix("100.88.0.0/14")

// netLockPath serialises address allocation between toolhost processes on one machine.
const netLockPath = "/run/lock/toolhost-net.lock"

// NetworkOptions configure network = true sandboxes.
type NetworkOptions struct {
	// ExtraAllowedCIDRs are destinations admitted on any port despite blockedRanges (but never
	// alwaysBlockedRanges or the host's own addresses). For tests only: they open a hole in the
	// wall.
	ExtraAllowedCIDRs []netip.Prefix
}

// sandboxNet is one sandbox's network: a namespace holding one end of a veth pair, the other end
// on the host, and an iptables chain on the host deciding what leaves.
type sandboxNet struct {
	id      string // the sandbox id: netns name, chain name, rule comment, link alias
	hostIf  string
	sbIf    string
	hostIP  netip.Addr
	sbIP    netip.Addr
	created []string // what exists, for teardown: "netns", "link", "chain", "hooks", "nat"
}

// NSPath is the namespace's path for the OCI spec.
func (n *sandboxNet) NSPath() string { return "/var/run/netns/" + n.id }

// setupNetwork makes the namespace, veth pair, addresses, routes, firewall chain and NAT of a
// sandbox. On failure it removes what it made.
func setupNetwork(ctx context.Context, id string, opts NetworkOptions) (n *sandboxNet, err error) {
	tag := id[len(id)-idSuffixLen:]
	made := &sandboxNet{id: id, hostIf: "th" + tag + "h", sbIf: "th" + tag + "s"}
	n = made
	defer func() {
		if err != nil {
			_ = made.teardown(context.WithoutCancel(ctx)) // n is nil by now
		}
	}()
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		return nil, fmt.Errorf("turning on IPv4 forwarding for sandbox networks: %w", err)
	}
	// Counted as made before it is: a cancelled `ip netns add` may have made it all the same.
	n.created = append(n.created, "netns")
	if err := run(ctx, "ip", "netns", "add", id); err != nil {
		return nil, err
	}
	unlock, err := lockFile(netLockPath)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if n.hostIP, n.sbIP, err = pickSubnet(ctx); err != nil {
		return nil, err
	}
	steps := [][]string{
		{"ip", "link", "add", n.hostIf, "type", "veth", "peer", "name", n.sbIf, "netns", id},
	}
	for _, s := range steps {
		if err := run(ctx, s...); err != nil {
			return nil, err
		}
	}
	n.created = append(n.created, "link")
	steps = [][]string{
		{"ip", "link", "set", "dev", n.hostIf, "alias", id},
		{"ip", "link", "set", "dev", n.hostIf, "addrgenmode", "none"},
		{"ip", "addr", "add", n.hostIP.String() + "/30", "dev", n.hostIf},
		{"ip", "link", "set", "dev", n.hostIf, "up"},
		{"ip", "-n", id, "link", "set", "dev", n.sbIf, "addrgenmode", "none"},
		{"ip", "-n", id, "addr", "add", n.sbIP.String() + "/30", "dev", n.sbIf},
		{"ip", "-n", id, "link", "set", "dev", n.sbIf, "up"},
		{"ip", "-n", id, "link", "set", "dev", "lo", "up"},
		{"ip", "-n", id, "route", "add", "default", "via", n.hostIP.String()},
	}
	for _, s := range steps {
		if err := run(ctx, s...); err != nil {
			return nil, err
		}
	}
	unlock()

	// The chain: what a sandbox may open. Established replies pass; test-only extra destinations
	// pass; the host's own addresses and the blocked ranges are refused at once; TCP to 80 and 443
	// passes; everything else is refused.
	if err := iptables(ctx, "-N", id); err != nil {
		return nil, err
	}
	n.created = append(n.created, "chain")
	rules := [][]string{
		{"-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT"},
		{"-m", "addrtype", "--dst-type", "LOCAL", "-j", "REJECT"},
	}
	for _, r := range alwaysBlockedRanges {
		rules = append(rules, []string{"-d", r, "-j", "REJECT"})
	}
	for _, p := range opts.ExtraAllowedCIDRs {
		rules = append(rules, []string{"-d", p.String(), "-j", "ACCEPT"})
	}
	for _, r := range blockedRanges {
		rules = append(rules, []string{"-d", r, "-j", "REJECT"})
	}
	ports := make([]string, len(allowedPorts))
	for i, p := range allowedPorts {
		ports[i] = strconv.Itoa(p)
	}
	rules = append(rules,
		[]string{"-p", "tcp", "-m", "multiport", "--dports", strings.Join(ports, ","), "-j", "ACCEPT"},
		[]string{"-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset"},
		[]string{"-j", "REJECT"},
	)
	for _, r := range rules {
		if err := iptables(ctx, append([]string{"-A", id}, r...)...); err != nil {
			return nil, err
		}
	}
	// Hooks, each marked with the id so a sweep finds them. Inserted in reverse: the ESTABLISHED
	// accept for replies into the sandbox ends up above the reject of anything else going in.
	n.created = append(n.created, "hooks")
	hooks := [][]string{
		{"-I", "INPUT", "-i", n.hostIf, "-m", "comment", "--comment", id, "-j", id},
		{"-I", "FORWARD", "-i", n.hostIf, "-m", "comment", "--comment", id, "-j", id},
		{"-I", "FORWARD", "-o", n.hostIf, "-m", "comment", "--comment", id, "-j", "REJECT"},
		{"-I", "FORWARD", "-o", n.hostIf, "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-m", "comment", "--comment", id, "-j", "ACCEPT"},
	}
	for _, h := range hooks {
		if err := iptables(ctx, h...); err != nil {
			return nil, err
		}
	}
	n.created = append(n.created, "nat")
	if err := iptables(ctx, "-t", "nat", "-I", "POSTROUTING", "-s", n.sbIP.String()+"/32", "!", "-o", n.hostIf,
		"-m", "comment", "--comment", id, "-j", "MASQUERADE"); err != nil {
		return nil, err
	}
	return n, nil
}

// Rejected counts the packets the sandbox's chain refused.
func (n *sandboxNet) Rejected(ctx context.Context) (uint64, error) {
	out, err := output(ctx, "iptables", "-w", "-L", n.id, "-v", "-x", "-n")
	if err != nil {
		return 0, err
	}
	var total uint64
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[2] == "REJECT" {
			v, _ := strconv.ParseUint(f[0], 10, 64)
			total += v
		}
	}
	return total, nil
}

// teardown removes the sandbox's rules, chain, links and namespace. Safe to call more than once.
func (n *sandboxNet) teardown(ctx context.Context) error {
	if len(n.created) == 0 {
		return nil
	}
	errs := []error{removeRulesTagged(ctx, func(c string) bool { return c == n.id }),
		removeChains(ctx, func(c string) bool { return c == n.id })}
	if err := run(ctx, "ip", "link", "del", n.hostIf); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
		errs = append(errs, err)
	}
	if err := run(ctx, "ip", "netns", "del", n.id); err != nil && !strings.Contains(err.Error(), "No such file") {
		errs = append(errs, err)
	}
	n.created = nil
	return errors.Join(errs...)
}

// pickSubnet chooses a /30 of sandboxNetPool no interface on the host uses yet. The caller holds
// the network lock.
func pickSubnet(ctx context.Context) (host, sb netip.Addr, err error) {
	out, err := output(ctx, "ip", "-o", "-4", "addr", "show")
	if err != nil {
		return host, sb, err
	}
	used := string(out)
	base := sandboxNetPool.Addr().As4()
	blocks := uint32(1) << (32 - sandboxNetPool.Bits() - 2)
	for range 64 {
		var r [4]byte
		if _, err := rand.Read(r[:]); err != nil {
			return host, sb, fmt.Errorf("choosing a sandbox subnet: %w", err)
		}
		off := (binary.BigEndian.Uint32(r[:]) % blocks) << 2
		v := binary.BigEndian.Uint32(base[:]) + off
		var h, s [4]byte
		binary.BigEndian.PutUint32(h[:], v+1)
		binary.BigEndian.PutUint32(s[:], v+2)
		host, sb = netip.AddrFrom4(h), netip.AddrFrom4(s)
		if !strings.Contains(used, " "+host.String()+"/") {
			return host, sb, nil
		}
	}
	return host, sb, errors.New("no free sandbox subnet left")
}

// removeRulesTagged deletes every iptables rule (filter and nat) whose comment matches.
func removeRulesTagged(ctx context.Context, match func(comment string) bool) error {
	var errs []error
	for _, table := range []string{"filter", "nat"} {
		out, err := output(ctx, "iptables", "-w", "-t", table, "-S")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, line := range strings.Split(string(out), "\n") {
			if !strings.HasPrefix(line, "-A ") {
				continue
			}
			args := splitRule(line)
			comment := ""
			for i := 0; i+1 < len(args); i++ {
				if args[i] == "--comment" {
					comment = args[i+1]
				}
			}
			if comment == "" || !match(comment) {
				continue
			}
			args[0] = "-D"
			if err := iptables(ctx, append([]string{"-t", table}, args...)...); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// removeChains flushes and deletes every filter chain whose name matches.
func removeChains(ctx context.Context, match func(chain string) bool) error {
	out, err := output(ctx, "iptables", "-w", "-S")
	if err != nil {
		return err
	}
	var errs []error
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "-N" && match(f[1]) {
			if err := iptables(ctx, "-F", f[1]); err != nil {
				errs = append(errs, err)
			}
			if err := iptables(ctx, "-X", f[1]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// splitRule splits a line of iptables -S, keeping "quoted words" whole.
func splitRule(line string) []string {
	var out []string
	var cur strings.Builder
	quoted, have := false, false
	for _, r := range line {
		switch {
		case r == '"':
			quoted, have = !quoted, true
		case r == ' ' && !quoted:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}

// hostLinks lists the host's network interfaces with their alias.
func hostLinks(ctx context.Context) (map[string]string, error) {
	out, err := output(ctx, "ip", "-j", "link", "show")
	if err != nil {
		return nil, err
	}
	var links []struct {
		Name  string `json:"ifname"`
		Alias string `json:"ifalias"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		return nil, fmt.Errorf("reading ip link's list: %w", err)
	}
	m := make(map[string]string, len(links))
	for _, l := range links {
		m[l.Name] = l.Alias
	}
	return m, nil
}

// netnsNames lists the named network namespaces (ip netns).
func netnsNames() ([]string, error) {
	entries, err := os.ReadDir("/var/run/netns")
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing network namespaces: %w", err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names, nil
}

func iptables(ctx context.Context, args ...string) error {
	return run(ctx, append([]string{"iptables", "-w"}, args...)...)
}

// ToolError is a host tool (ip, iptables) that failed.
type ToolError struct {
	Args   []string
	Output string
	Err    error
}

func (e *ToolError) Error() string {
	return fmt.Sprintf("%s failed: %s", strings.Join(e.Args, " "), strings.TrimSpace(firstNonEmpty(e.Output, e.Err.Error())))
}

func (e *ToolError) Unwrap() error { return e.Err }

func firstNonEmpty(a, b string) string {
	if strings.TrimSpace(a) != "" {
		return a
	}
	return b
}

func run(ctx context.Context, args ...string) error {
	_, err := output(ctx, args...)
	return err
}

func output(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, &ToolError{Args: args, Output: stderr.String(), Err: err}
	}
	return stdout.Bytes(), nil
}

// lockFile takes an exclusive flock on path; the returned func releases it (once).
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	done := false
	return func() {
		if !done {
			done = true
			_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
			f.Close()
		}
	}, nil
}
