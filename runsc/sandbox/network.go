package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
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

// DefaultMaxConnections is how many connections a network sandbox may have open at once when
// NetworkOptions.MaxConnections is not set.
const DefaultMaxConnections = 64

// NetworkOptions configure network = true sandboxes.
type NetworkOptions struct {
	// ExtraAllowedCIDRs are destinations admitted on any port despite blockedRanges (but never
	// alwaysBlockedRanges or the host's own addresses). For tests only: they open a hole in the
	// wall.
	ExtraAllowedCIDRs []netip.Prefix
	// MaxConnections caps the connections one sandbox has open at once (TCP, and separately
	// other protocols' flows), so that no sandbox fills the host's connection-tracking table. A
	// new connection past it is refused at once (a TCP reset) and counted apart from refused
	// destinations (NetCounters.OverConnLimit). 0 or less means DefaultMaxConnections.
	MaxConnections int
	// OnlyTo, when set, makes the network of a sandbox a packages-mode one: the only destination
	// it reaches is this TCP address and port, an address of this machine where the egress proxy
	// (host/egress) listens. Nothing else: no other port or address of the host, no other
	// sandbox, no DNS (the proxy resolves names), nothing public; the host forwards none of its
	// packets, so neither NAT nor IPv4 forwarding is set up for it. ExtraAllowedCIDRs don't
	// apply. The address must be an IPv4 address of this machine outside 127.0.0.0/8 (which a
	// sandbox can't reach), e.g. the one host/egress adds to lo for its proxy.
	OnlyTo netip.AddrPort
}

// checkOnlyTo says what is wrong with a packages-mode destination, in the user's words.
func checkOnlyTo(to netip.AddrPort) error {
	a := to.Addr().Unmap()
	if !a.Is4() || to.Port() == 0 {
		return fmt.Errorf("the egress proxy's address %s is not an IPv4 address and port: a packages-mode sandbox reaches the proxy over IPv4 only", to)
	}
	if a.IsLoopback() || a.IsUnspecified() {
		return fmt.Errorf("the egress proxy listens on %s, which a sandbox can't reach: give it an address of this machine outside 127.0.0.0/8 (host/egress adds one to lo)", to)
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return fmt.Errorf("listing this machine's addresses: %w", err)
	}
	for _, ia := range addrs {
		if n, ok := ia.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == a {
				return nil
			}
		}
	}
	return fmt.Errorf("the egress proxy's address %s is not an address of this machine: start the proxy (it adds the address) before packages-mode sandboxes", a)
}

// ConnectionCap is the cap MaxConnections sets: DefaultMaxConnections when it is not set.
func (o NetworkOptions) ConnectionCap() int {
	if o.MaxConnections <= 0 {
		return DefaultMaxConnections
	}
	return o.MaxConnections
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
// sandbox, with IPv6 off on both ends and IPv4 forwarding on for it (see ensureForwarding); a
// packages-mode one (opts.OnlyTo) gets neither NAT nor forwarding. On failure it removes what it
// made.
func setupNetwork(ctx context.Context, id string, opts NetworkOptions) (n *sandboxNet, err error) {
	if opts.OnlyTo.IsValid() {
		if err := checkOnlyTo(opts.OnlyTo); err != nil {
			return nil, err
		}
	}
	tag := id[len(id)-idSuffixLen:]
	made := &sandboxNet{id: id, hostIf: "th" + tag + "h", sbIf: "th" + tag + "s"}
	n = made
	defer func() {
		if err != nil {
			_ = made.teardown(context.WithoutCancel(ctx)) // n is nil by now
		}
	}()
	if err := n.makeNamespace(ctx); err != nil {
		return nil, err
	}
	if err := n.makeLink(ctx, opts); err != nil {
		return nil, err
	}
	if err := n.makeChain(ctx, opts); err != nil {
		return nil, err
	}
	if opts.OnlyTo.IsValid() {
		// The proxy is an address of this machine: the sandbox's packets to it are delivered
		// here, never forwarded, so there is nothing to translate or forward.
		return n, nil
	}
	if err := n.makeNAT(ctx); err != nil {
		return nil, err
	}
	if err := n.enableForwarding(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// makeNamespace makes the sandbox's network namespace, with IPv6 off in it.
func (n *sandboxNet) makeNamespace(ctx context.Context) error {
	// Counted as made before it is: a cancelled `ip netns add` may have made it all the same.
	n.created = append(n.created, "netns")
	if err := runCommand(ctx, "ip", "netns", "add", n.id); err != nil {
		return err
	}
	// IPv6 off in the namespace before the veth's end arrives there: it takes the namespace's
	// default, and lo loses ::1. The sandbox has IPv4 only, which the host's chain filters.
	return disableIPv6InNetns(n.NSPath())
}

// makeLink picks the sandbox's subnet and makes its veth pair, one end in the namespace: IPv6
// off on the host's end, addresses on both, both ends and lo up, and the namespace's route out
// (to the proxy alone for a packages-mode one). It holds the network lock while it does.
func (n *sandboxNet) makeLink(ctx context.Context, opts NetworkOptions) error {
	id := n.id
	unlock, err := lockFile(netLockPath)
	if err != nil {
		return err
	}
	defer unlock()
	if n.hostIP, n.sbIP, err = pickSubnet(ctx); err != nil {
		return err
	}
	if err := runCommand(ctx, "ip", "link", "add", n.hostIf, "type", "veth", "peer", "name", n.sbIf, "netns", id); err != nil {
		return err
	}
	n.created = append(n.created, "link")
	// The host's end takes no IPv6 either: nothing the sandbox sends over IPv6 reaches the host,
	// whose iptables rules are IPv4 only.
	if err := disableIPv6(n.hostIf); err != nil {
		return err
	}
	steps := [][]string{
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
	if opts.OnlyTo.IsValid() {
		// A route to the proxy alone: a connection anywhere else fails at once inside the
		// sandbox (network unreachable), and the chain refuses what a route could still reach.
		steps[len(steps)-1] = []string{"ip", "-n", id, "route", "add", opts.OnlyTo.Addr().Unmap().String() + "/32", "via", n.hostIP.String()}
	}
	for _, s := range steps {
		if err := runCommand(ctx, s...); err != nil {
			return err
		}
	}
	return nil
}

// makeChain makes the sandbox's iptables chain (chainRules) and hooks it into INPUT and FORWARD
// for what comes from and goes to the sandbox's veth.
func (n *sandboxNet) makeChain(ctx context.Context, opts NetworkOptions) error {
	id := n.id
	if err := iptables(ctx, "-N", id); err != nil {
		return err
	}
	n.created = append(n.created, "chain")
	rules := chainRules(opts)
	for _, r := range rules {
		if err := iptables(ctx, append([]string{"-A", id}, r...)...); err != nil {
			return err
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
			return err
		}
	}
	return nil
}

// makeNAT masquerades what the sandbox sends out of any interface but its veth.
func (n *sandboxNet) makeNAT(ctx context.Context) error {
	n.created = append(n.created, "nat")
	return iptables(ctx, "-t", "nat", "-I", "POSTROUTING", "-s", n.sbIP.String()+"/32", "!", "-o", n.hostIf,
		"-m", "comment", "--comment", n.id, "-j", "MASQUERADE")
}

// enableForwarding turns IPv4 forwarding on for the sandbox (ensureForwarding), holding the
// network lock. It comes last, once the chain decides what the sandbox's packets may do.
func (n *sandboxNet) enableForwarding(ctx context.Context) error {
	n.created = append(n.created, "forwarding")
	unlock, err := lockFile(netLockPath)
	if err != nil {
		return err
	}
	defer unlock()
	return ensureForwarding(ctx, n.hostIf, n.id)
}

// chainRules are the rules of a sandbox's chain, in order: what the sandbox may open.
//
// With network (web): established replies pass; the host's own addresses and the always blocked
// ranges are refused at once; a connection past the sandbox's cap is refused at once; test-only
// extra destinations pass; the blocked ranges are refused; TCP to 80 and 443 passes; everything
// else is refused.
//
// Packages mode (OnlyTo): established replies pass; a connection past the cap is refused at once;
// TCP to the proxy's address and port passes; everything else is refused (TCP with a reset, so a
// direct connection fails at once rather than hanging).
func chainRules(opts NetworkOptions) [][]string {
	limit := strconv.Itoa(opts.ConnectionCap())
	if opts.OnlyTo.IsValid() {
		return [][]string{
			{"-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT"},
			{"-p", "tcp", "-m", "connlimit", "--connlimit-above", limit, "--connlimit-mask", "32", "-j", "REJECT", "--reject-with", "tcp-reset"},
			{"-d", opts.OnlyTo.Addr().Unmap().String() + "/32", "-p", "tcp", "-m", "tcp", "--dport", strconv.Itoa(int(opts.OnlyTo.Port())), "-j", "ACCEPT"},
			{"-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset"},
			{"-j", "REJECT"},
		}
	}
	rules := [][]string{
		{"-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT"},
		{"-m", "addrtype", "--dst-type", "LOCAL", "-j", "REJECT"},
	}
	for _, r := range alwaysBlockedRanges {
		rules = append(rules, []string{"-d", r, "-j", "REJECT"})
	}
	// Only NEW connections get this far (replies passed above). connlimit counts the
	// sandbox's connections in the connection-tracking table, without those already closed.
	rules = append(rules,
		[]string{"-p", "tcp", "-m", "connlimit", "--connlimit-above", limit, "--connlimit-mask", "32", "-j", "REJECT", "--reject-with", "tcp-reset"},
		[]string{"!", "-p", "tcp", "-m", "connlimit", "--connlimit-above", limit, "--connlimit-mask", "32", "-j", "REJECT"},
	)
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
	return rules
}

// NetCounters are what a sandbox's firewall chain counted.
type NetCounters struct {
	// Refused counts packets to destinations a sandbox may not reach (the host's own
	// addresses, private and reserved ranges, ports other than 80 and 443).
	Refused uint64
	// OverConnLimit counts new connections refused because the sandbox already had
	// NetworkOptions.ConnectionCap() open.
	OverConnLimit uint64
}

// Counters reads the sandbox's chain's counters.
func (n *sandboxNet) Counters(ctx context.Context) (NetCounters, error) {
	var c NetCounters
	out, err := commandOutput(ctx, "iptables", "-w", "-v", "-S", n.id)
	if err != nil {
		return c, err
	}
	for _, line := range strings.Split(string(out), "\n") {
		args := splitRule(line)
		if len(args) == 0 || args[0] != "-A" || !slices.Contains(args, "REJECT") {
			continue
		}
		i := slices.Index(args, "-c")
		if i < 0 || i+1 >= len(args) {
			continue
		}
		v, _ := strconv.ParseUint(args[i+1], 10, 64)
		if slices.Contains(args, "connlimit") {
			c.OverConnLimit += v
		} else {
			c.Refused += v
		}
	}
	return c, nil
}

// NetworkCounters reads what the sandbox's firewall chain counted (zero without network): why
// its connections were refused. Read it before Destroy.
func (s *Sandbox) NetworkCounters(ctx context.Context) (NetCounters, error) {
	if s.net == nil {
		return NetCounters{}, nil
	}
	return s.net.Counters(ctx)
}

// teardown removes the sandbox's rules, chain, links and namespace. Safe to call more than once.
func (n *sandboxNet) teardown(ctx context.Context) error {
	if len(n.created) == 0 {
		return nil
	}
	// The link first: with it gone nothing passes, whatever the rules say while they go.
	var errs []error
	if err := runCommand(ctx, "ip", "link", "del", n.hostIf); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
		errs = append(errs, err)
	}
	errs = append(errs, removeRulesTagged(ctx, func(c string) bool { return c == n.id }),
		removeChains(ctx, func(c string) bool { return c == n.id }))
	if err := runCommand(ctx, "ip", "netns", "del", n.id); err != nil && !strings.Contains(err.Error(), "No such file") {
		errs = append(errs, err)
	}
	if slices.Contains(n.created, "forwarding") {
		if err := RestoreForwarding(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	n.created = nil
	return errors.Join(errs...)
}

// pickSubnet chooses a /30 of sandboxNetPool no interface on the host uses yet. The caller holds
// the network lock.
func pickSubnet(ctx context.Context) (host, sb netip.Addr, err error) {
	out, err := commandOutput(ctx, "ip", "-o", "-4", "addr", "show")
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
		out, err := commandOutput(ctx, "iptables", "-w", "-t", table, "-S")
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
	out, err := commandOutput(ctx, "iptables", "-w", "-S")
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
	out, err := commandOutput(ctx, "ip", "-j", "link", "show")
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
	return runCommand(ctx, append([]string{"iptables", "-w"}, args...)...)
}

// HostCommandError is a command of the host's (ip, iptables, iptables-restore) that failed while
// making, reading or removing a sandbox's network: its arguments, what it said, and how it ended.
type HostCommandError struct {
	Args   []string
	Output string
	Err    error
}

func (e *HostCommandError) Error() string {
	return fmt.Sprintf("%s failed: %s", strings.Join(e.Args, " "), strings.TrimSpace(firstNonEmpty(e.Output, e.Err.Error())))
}

func (e *HostCommandError) Unwrap() error { return e.Err }

func firstNonEmpty(a, b string) string {
	if strings.TrimSpace(a) != "" {
		return a
	}
	return b
}

// runCommand runs a command of this machine (ip, iptables) and returns its error with what it
// printed.
func runCommand(ctx context.Context, args ...string) error {
	_, err := commandOutput(ctx, args...)
	return err
}

// commandOutput runs a command of this machine and returns what it printed on stdout, or its
// error with what it printed on stderr.
func commandOutput(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, &HostCommandError{Args: args, Output: stderr.String(), Err: err}
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

// IPv4 forwarding.
//
// The kernel forwards an IPv4 packet when the interface it came in on forwards
// (net.ipv4.conf.<if>.forwarding). A sandbox's packets come in on its veth, but the replies come
// in on the uplink, so a sandbox's traffic needs forwarding on every interface. net.ipv4.ip_forward
// (conf.all) is left alone: where the machine already forwards (a router, docker), nothing is
// changed. Where it doesn't, while network sandboxes exist toolhost turns forwarding on per
// interface (and in conf.default, for interfaces made later), and a filter chain of its own,
// forwardChain, hooked first into FORWARD, drops every forwarded packet that neither comes from
// nor goes to a sandbox's veth and would not have been forwarded before: the machine forwards
// nothing more than it did. The chain is also the record of what forwarded before, so when the
// last network sandbox on the machine goes (or a sweep after a crash finds none), every setting is
// put back. Each sandbox adds two rules to the chain, marked with its id: they let its traffic
// through and tell that it exists. All of it happens under netLockPath, across processes.
const (
	forwardChain = "TOOLHOST-FORWARD"
	// forwardedBefore marks "-i IF -j RETURN": IF forwarded before toolhost turned forwarding on.
	forwardedBefore = "TOOLHOST-FORWARDED-BEFORE"
	// notForwardedBefore marks "-j DROP" (conf.default did not forward: no interface not named
	// by forwardedBefore did) or "-i IF -j DROP" (IF did not, where conf.default did).
	notForwardedBefore = "TOOLHOST-NOT-FORWARDED-BEFORE"
)

const ipv4Conf = "/proc/sys/net/ipv4/conf"

// forwardRecord is what forwardChain holds.
type forwardRecord struct {
	exists     bool
	hooked     bool     // FORWARD jumps to it (it always does, unless someone removed the hook)
	defaultOff bool     // conf.default did not forward
	on, off    []string // interfaces that did, and (where conf.default did) that did not
	sandboxes  int      // rules of sandboxes
}

// touched reports whether toolhost turned forwarding on for interface dev (and so turns it off
// again).
func (r forwardRecord) touched(dev string) bool {
	if dev == "lo" || !plainIfName(dev) {
		return false
	}
	return (r.defaultOff && !slices.Contains(r.on, dev)) || slices.Contains(r.off, dev)
}

func readForwardRecord(ctx context.Context) (forwardRecord, error) {
	var r forwardRecord
	out, err := commandOutput(ctx, "iptables", "-w", "-S")
	if err != nil {
		return r, err
	}
	for _, line := range strings.Split(string(out), "\n") {
		args := splitRule(line)
		switch {
		case len(args) == 2 && args[0] == "-N" && args[1] == forwardChain:
			r.exists = true
		case len(args) > 2 && args[0] == "-A" && args[1] == "FORWARD" && slices.Contains(args, forwardChain):
			r.hooked = true
		case len(args) > 2 && args[0] == "-A" && args[1] == forwardChain:
			in := ""
			if i := slices.Index(args, "-i"); i >= 0 && i+1 < len(args) {
				in = args[i+1]
			}
			switch {
			case slices.Contains(args, forwardedBefore):
				r.on = append(r.on, in)
			case slices.Contains(args, notForwardedBefore) && in == "":
				r.defaultOff = true
			case slices.Contains(args, notForwardedBefore):
				r.off = append(r.off, in)
			default:
				r.sandboxes++
			}
		}
	}
	return r, nil
}

// ensureForwarding makes IPv4 forwarding work for the sandbox whose host-side veth is hostIf:
// the record and guard chain where needed (see above), forwarding on, and the sandbox's rules in
// the chain. The caller holds the network lock.
func ensureForwarding(ctx context.Context, hostIf, id string) error {
	rec, err := readForwardRecord(ctx)
	if err != nil {
		return err
	}
	all, err := readSysctl(filepath.Join(ipv4Conf, "all", "forwarding"))
	if err != nil {
		return fmt.Errorf("reading the host's IPv4 forwarding setting: %w", err)
	}
	if rec.exists && all == "1" {
		// Someone turned forwarding on for the whole machine since: the machine forwards, and
		// the guard would only stand in its way.
		if err := dropForwardGuard(ctx); err != nil {
			return err
		}
		rec = forwardRecord{}
	}
	if !rec.exists && all != "1" {
		if rec, err = recordForwarding(ctx); err != nil {
			return err
		}
	}
	if rec.exists {
		if !rec.hooked { // someone removed the hook (iptables -F FORWARD): the record stands
			if err := iptables(ctx, "-I", "FORWARD", "1", "-m", "comment", "--comment", forwardChain, "-j", forwardChain); err != nil {
				return err
			}
		}
		if rec.defaultOff {
			if err := writeSysctlIfNot(filepath.Join(ipv4Conf, "default", "forwarding"), "1"); err != nil {
				return fmt.Errorf("turning on IPv4 forwarding for sandbox networks: %w", err)
			}
		}
		devs, err := ipv4Devices()
		if err != nil {
			return err
		}
		for _, d := range devs {
			if rec.touched(d) {
				if err := writeSysctlIfNot(filepath.Join(ipv4Conf, d, "forwarding"), "1"); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("turning on IPv4 forwarding for sandbox networks: %w", err)
				}
			}
		}
		for _, dir := range []string{"-o", "-i"} {
			if err := iptables(ctx, "-I", forwardChain, "1", dir, hostIf, "-m", "comment", "--comment", id, "-j", "RETURN"); err != nil {
				return err
			}
		}
	}
	if err := writeSysctlIfNot(filepath.Join(ipv4Conf, hostIf, "forwarding"), "1"); err != nil {
		return fmt.Errorf("turning on IPv4 forwarding for the sandbox's interface: %w", err)
	}
	return nil
}

// recordForwarding writes forwardChain from the current settings, with its hook, in one
// iptables-restore transaction: either all of it exists, or none.
func recordForwarding(ctx context.Context) (forwardRecord, error) {
	rec := forwardRecord{exists: true, hooked: true}
	def, err := readSysctl(filepath.Join(ipv4Conf, "default", "forwarding"))
	if err != nil {
		return rec, fmt.Errorf("reading the host's IPv4 forwarding setting: %w", err)
	}
	rec.defaultOff = def != "1"
	devs, err := ipv4Devices()
	if err != nil {
		return rec, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*filter\n:%s - [0:0]\n", forwardChain)
	for _, d := range devs {
		if d == "lo" || !plainIfName(d) {
			continue
		}
		v, err := readSysctl(filepath.Join(ipv4Conf, d, "forwarding"))
		if err != nil {
			continue // gone since it was listed
		}
		switch {
		case v == "1" && rec.defaultOff:
			rec.on = append(rec.on, d)
			fmt.Fprintf(&b, "-A %s -i %s -m comment --comment %s -j RETURN\n", forwardChain, d, forwardedBefore)
		case v != "1" && !rec.defaultOff:
			rec.off = append(rec.off, d)
			fmt.Fprintf(&b, "-A %s -i %s -m comment --comment %s -j DROP\n", forwardChain, d, notForwardedBefore)
		}
	}
	if rec.defaultOff {
		fmt.Fprintf(&b, "-A %s -m comment --comment %s -j DROP\n", forwardChain, notForwardedBefore)
	}
	fmt.Fprintf(&b, "-I FORWARD 1 -m comment --comment %s -j %s\nCOMMIT\n", forwardChain, forwardChain)
	if err := runInput(ctx, b.String(), "iptables-restore", "-w", "--noflush"); err != nil {
		return rec, fmt.Errorf("recording the host's IPv4 forwarding settings: %w", err)
	}
	return rec, nil
}

// RestoreForwarding puts the host's IPv4 forwarding settings back as they were before toolhost
// turned forwarding on for network sandboxes, once no network sandbox of any toolhost on the
// machine is left; until then it does nothing. A sandbox's teardown calls it; a sweep calls it
// after removing leftovers, so that a crash doesn't leave forwarding on.
func RestoreForwarding(ctx context.Context) error {
	unlock, err := lockFile(netLockPath)
	if err != nil {
		return err
	}
	defer unlock()
	rec, err := readForwardRecord(ctx)
	if err != nil || !rec.exists || rec.sandboxes > 0 {
		return err
	}
	all, err := readSysctl(filepath.Join(ipv4Conf, "all", "forwarding"))
	if err != nil {
		return fmt.Errorf("reading the host's IPv4 forwarding setting: %w", err)
	}
	// Where someone turned forwarding on for the whole machine since, it stays on.
	if all != "1" {
		var errs []error
		if rec.defaultOff {
			errs = append(errs, writeSysctlIfNot(filepath.Join(ipv4Conf, "default", "forwarding"), "0"))
		}
		devs, err := ipv4Devices()
		errs = append(errs, err)
		for _, d := range devs {
			if rec.touched(d) {
				if err := writeSysctlIfNot(filepath.Join(ipv4Conf, d, "forwarding"), "0"); !errors.Is(err, fs.ErrNotExist) {
					errs = append(errs, err)
				}
			}
		}
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("putting the host's IPv4 forwarding settings back: %w", err)
		}
	}
	return dropForwardGuard(ctx)
}

// dropForwardGuard removes forwardChain and its hook.
func dropForwardGuard(ctx context.Context) error {
	return errors.Join(removeRulesTagged(ctx, func(c string) bool { return c == forwardChain }),
		removeChains(ctx, func(c string) bool { return c == forwardChain }))
}

// ipv4Devices lists the interfaces in /proc/sys/net/ipv4/conf (not "all" and "default").
func ipv4Devices() ([]string, error) {
	entries, err := os.ReadDir(ipv4Conf)
	if err != nil {
		return nil, fmt.Errorf("listing the host's interfaces: %w", err)
	}
	var out []string
	for _, e := range entries {
		if n := e.Name(); n != "all" && n != "default" {
			out = append(out, n)
		}
	}
	return out, nil
}

var plainIfNameRx = regexp.MustCompile(`^[A-Za-z0-9_.@+=%-]+$`)

// plainIfName reports whether an interface name can go into an iptables-restore line as it is.
// Interfaces with other names are left alone.
func plainIfName(name string) bool { return plainIfNameRx.MatchString(name) }

func readSysctl(path string) (string, error) {
	b, err := os.ReadFile(path)
	return strings.TrimSpace(string(b)), err
}

// writeSysctlIfNot writes v to the sysctl file at path unless it holds v already.
func writeSysctlIfNot(path, v string) error {
	if cur, err := readSysctl(path); err != nil {
		return err
	} else if cur == v {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte(v))
	return errors.Join(err, f.Close())
}

// IPv6.

const ipv6Conf = "/proc/sys/net/ipv6/conf"

// disableIPv6 turns IPv6 off on the host's interface dev (nothing to do on a host without IPv6).
func disableIPv6(dev string) error {
	if _, err := os.Stat(ipv6Conf); err != nil {
		return nil
	}
	if err := writeSysctlIfNot(filepath.Join(ipv6Conf, dev, "disable_ipv6"), "1"); err != nil {
		return fmt.Errorf("turning IPv6 off on %s: %w", dev, err)
	}
	return nil
}

// disableIPv6InNetns turns IPv6 off in the network namespace at nsPath: on every interface there
// (conf.all) and on every interface made or moved there later (conf.default).
func disableIPv6InNetns(nsPath string) error {
	return inNetns(nsPath, func() error {
		if _, err := os.Stat(ipv6Conf); err != nil {
			return nil
		}
		for _, c := range []string{"default", "all"} {
			if err := writeSysctlIfNot(filepath.Join(ipv6Conf, c, "disable_ipv6"), "1"); err != nil {
				return fmt.Errorf("turning IPv6 off in the sandbox's network namespace: %w", err)
			}
		}
		return nil
	})
}

// inNetns runs fn on an OS thread of its own that has entered the network namespace at nsPath:
// what fn opens under /proc/sys/net and the sockets it makes belong to that namespace. A thread
// that cannot go back to the process's namespace ends with fn's goroutine.
func inNetns(nsPath string, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("opening this thread's network namespace: %w", err)
			return
		}
		defer orig.Close()
		target, err := os.Open(nsPath)
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("opening the network namespace %s: %w", nsPath, err)
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("entering the network namespace %s: %w", nsPath, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			// The thread stays locked, and so ends with this goroutine.
			done <- errors.Join(ferr, fmt.Errorf("leaving the network namespace %s: %w", nsPath, err))
			return
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	return <-done
}

func runInput(ctx context.Context, input string, args ...string) error {
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.Stdin = strings.NewReader(input)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return &HostCommandError{Args: args, Output: stderr.String(), Err: err}
	}
	return nil
}
