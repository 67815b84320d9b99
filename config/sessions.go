package config

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
)

// SessionsConfig is [sessions]: conversation sandboxes. A call that names a
// session runs the built-in tools run_python, run_bash, sandbox_files and
// sandbox_file in that conversation's own sandbox, whose files stay between
// runs; the host keeps who owns which session and a ledger of the runs.
type SessionsConfig struct {
	// Enabled serves the built-in session tools and the sessions API.
	// Default false. Read at start only.
	Enabled bool
	// Who may use conversation sandboxes: "editors" (editors and admins,
	// the default) or "admins". Viewers never may.
	Who string
	// Seconds is the most one run in a session may take on the clock
	// (SessionSeconds*).
	Seconds int
	// DiskMB is the size of each session's workspace (/work), a limit
	// that holds (SessionDiskMB*).
	DiskMB int
	// MemoryMB is the memory of each session's sandbox (SessionMemoryMB*).
	MemoryMB int
	// IdleMinutes: a sandbox unused this long is stopped; its files stay
	// (SessionIdleMinutes*).
	IdleMinutes int
	// KeepHours: a session unused this long is deleted, its files with
	// it. Default 24, 1..8760.
	KeepHours int
	// Network is the network of a new session: "off" (the default),
	// "web" (public addresses on ports 80 and 443) or "packages" (only the
	// host's egress proxy, which lets through PackageHosts).
	Network string
	// PackageHosts are the host names the egress proxy lets a "packages"
	// session reach: exact names ("pypi.org") or "*.example.org" for every
	// name under example.org. Default none.
	PackageHosts []string
	// ProxyListen is where the egress proxy listens, an IP address and
	// port; "" (the default) lets the host pick an address the sandboxes
	// reach.
	ProxyListen string
	// MaxSessionsPerPrincipal is the most sessions one principal may have;
	// making one more is refused (too_many_sessions). Default 20,
	// 1..10000: a person or a chat backend has a few conversations in use
	// within keep_hours, and 20 leaves room for that while one token
	// can't claim the host's disk (each session has a disk_mb image).
	// Lowered by a reload, it refuses new sessions only.
	MaxSessionsPerPrincipal int
	// MaxSessions is the most sessions the host keeps, every principal's
	// together; making one more is refused (too_many_sessions). Default
	// 200, 1..100000: ten principals at their own cap, and 200 images of
	// the default disk_mb are what a host's sessions_dir may be expected
	// to hold. Lowered by a reload, it refuses new sessions only: those
	// already there keep working. A new session must fit both caps.
	MaxSessions int
	// MaxTransfersPerPrincipal is the most file uploads and downloads
	// (the sessions API's PUT and GET of a file) one principal may have
	// going at once; one more is refused at once (too_many_transfers,
	// HTTP 429 with Retry-After). Default 4, 1..1024: a browser's parallel
	// uploads fit.
	MaxTransfersPerPrincipal int
	// MaxTransfers is the most file uploads and downloads going at once on
	// the host, every principal's together. Default 16, 1..4096: a
	// transfer may hold up to 64 MiB in memory in the host (and again in
	// the python plugin), so 16 bounds that at 1 GiB each.
	MaxTransfers int
}

// The defaults and ranges of the [sessions] numbers a session's sandbox is
// made with. These are the only ones: the host sends the values to the kind
// that keeps the sessions (the python kind), which takes them as they are
// and uses these defaults for what it has not been sent yet.
const (
	SessionSecondsDefault = 60
	SessionSecondsMin     = 1
	SessionSecondsMax     = 600

	// SessionDiskMBMin: the workspace is an ext4 image, which needs some
	// room for its own metadata.
	SessionDiskMBDefault = 1024
	SessionDiskMBMin     = 16
	SessionDiskMBMax     = 1 << 20

	// SessionMemoryMBMin is the least the python kind has taken since it
	// kept sessions: a session's sandbox runs the kind's agent, a Python
	// process, beside the code. (gVisor's own 64 MiB are added on top.)
	SessionMemoryMBDefault = 512
	SessionMemoryMBMin     = 64
	SessionMemoryMBMax     = 65536

	SessionIdleMinutesDefault = 15
	SessionIdleMinutesMin     = 1
	SessionIdleMinutesMax     = 1440
)

// The networks a session may have.
const (
	SessionNetworkOff      = "off"
	SessionNetworkWeb      = "web"
	SessionNetworkPackages = "packages"
)

// SessionNetworks are the networks a session may have, in the order the
// docs give them.
var SessionNetworks = []string{SessionNetworkOff, SessionNetworkWeb, SessionNetworkPackages}

func defaultSessions() SessionsConfig {
	return SessionsConfig{
		Who: "editors", Seconds: SessionSecondsDefault, DiskMB: SessionDiskMBDefault, MemoryMB: SessionMemoryMBDefault,
		IdleMinutes: SessionIdleMinutesDefault, KeepHours: 24,
		Network: SessionNetworkOff, PackageHosts: []string{},
		MaxSessionsPerPrincipal: 20, MaxSessions: 200, MaxTransfersPerPrincipal: 4, MaxTransfers: 16,
	}
}

// decodeSessions reads [sessions] into s.
func (d *decoder) decodeSessions(v any, s *SessionsConfig) {
	t := d.table("sessions", v)
	t.boolean("enabled", &s.Enabled)
	if t.str("who", &s.Who) {
		d.oneOf(t.at("who"), s.Who, "editors", "admins")
	}
	t.int("seconds", &s.Seconds, SessionSecondsMin, SessionSecondsMax)
	t.int("disk_mb", &s.DiskMB, SessionDiskMBMin, SessionDiskMBMax)
	t.int("memory_mb", &s.MemoryMB, SessionMemoryMBMin, SessionMemoryMBMax)
	t.int("idle_minutes", &s.IdleMinutes, SessionIdleMinutesMin, SessionIdleMinutesMax)
	t.int("keep_hours", &s.KeepHours, 1, 8760)
	if t.str("network", &s.Network) {
		d.oneOf(t.at("network"), s.Network, SessionNetworks...)
	}
	var hosts []string
	if t.strings("package_hosts", &hosts) {
		seen := map[string]int{}
		good := true
		for i, h := range hosts {
			p := indexPath(t.at("package_hosts"), i)
			if msg := checkPackageHost(h); msg != "" {
				d.addf(p, "%s", msg)
				good = false
				continue
			}
			if j, dup := seen[h]; dup {
				d.addf(p, "%q is already package_hosts[%d]", h, j)
				good = false
				continue
			}
			seen[h] = i
		}
		if good {
			s.PackageHosts = hosts
		}
	}
	if s.Network == SessionNetworkPackages && len(hosts) == 0 && !d.hasErrorAt(t.at("package_hosts")) {
		d.addf(t.at("network"), "new sessions would reach only the hosts of package_hosts, and it lists none: "+
			"list your package index's hosts there (e.g. [\"pypi.org\", \"files.pythonhosted.org\"]), or make new sessions \"off\"")
	}
	if t.str("proxy_listen", &s.ProxyListen) && s.ProxyListen != "" {
		if ap, err := netip.ParseAddrPort(s.ProxyListen); err != nil || ap.Addr().Zone() != "" {
			d.addf(t.at("proxy_listen"), "must be an IP address and port the sandboxes can reach, like \"10.200.0.1:3128\" (or \"\" to let the host pick one), not %q", s.ProxyListen)
		}
	}
	t.int("max_sessions_per_principal", &s.MaxSessionsPerPrincipal, 1, 10000)
	t.int("max_sessions", &s.MaxSessions, 1, 100000)
	t.int("max_transfers_per_principal", &s.MaxTransfersPerPrincipal, 1, 1024)
	t.int("max_transfers", &s.MaxTransfers, 1, 4096)
	t.done()
}

// labelRE is one label of a host name: letters, digits and hyphens, not
// starting or ending with a hyphen, at most 63 long.
var labelRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// checkPackageHost says what is wrong with an entry of package_hosts: a
// host name in lowercase, or "*." and a domain of at least two labels.
func checkPackageHost(h string) string {
	const like = `a host name like "pypi.org", or "*.example.org" for every name under example.org`
	name := strings.TrimPrefix(h, "*.")
	wild := name != h
	switch {
	case h == "":
		return "must not be empty: write " + like
	case isIP(h):
		return fmt.Sprintf("%q is an address: give the host's name, which the proxy resolves itself (it never lets a sandbox reach private or host addresses)", h)
	case strings.ContainsAny(h, ":/"):
		return fmt.Sprintf("must be %s, without a scheme, port or path, not %q", like, h)
	case strings.HasSuffix(h, "."):
		return fmt.Sprintf("write the name without its final dot: %q", strings.TrimSuffix(h, "."))
	case strings.ToLower(h) != h:
		return fmt.Sprintf("must be written in lowercase: %q", strings.ToLower(h))
	case strings.Contains(name, "*"):
		return fmt.Sprintf("a wildcard may only start the name, as \"*.\" followed by a domain: not %q", h)
	case len(name) > 253:
		return fmt.Sprintf("is longer than a host name may be (253 characters): %q", h)
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if !labelRE.MatchString(l) {
			return fmt.Sprintf("must be %s, not %q: each part between dots is 1 to 63 letters, digits or hyphens, not starting or ending with a hyphen", like, h)
		}
	}
	if wild && len(labels) < 2 {
		return fmt.Sprintf("%q would let through every name under .%s: name a domain of at least two parts, like \"*.example.org\"", h, name)
	}
	return ""
}

func isIP(s string) bool {
	_, err := netip.ParseAddr(strings.Trim(s, "[]"))
	return err == nil
}
