package config

import (
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
)

// ClusterConfig is [cluster]: how this host names itself to the other
// hosts sharing its store ([store]): the id its lease and its idempotency
// keys' claims carry, and the address the others give callers to reach it
// (in_progress answers name both). Both have defaults (Identity); a host
// on SQLite, alone, needs neither.
type ClusterConfig struct {
	// HostID is the host's id, unique among the hosts sharing a store;
	// "" is the default: the machine's hostname and the listen port,
	// "hostname:8080".
	HostID string
	// Address is where the other hosts and callers reach this host,
	// host:port; "" is the default: [server] listen, with the machine's
	// hostname for an address listening on every interface.
	Address string
	// SecretEnv and SecretFile say where the secret the hosts share is:
	// the name of an environment variable, or a file only the host's user
	// reads. A host with a secret forwards a conversation's calls, files
	// and attaches to the host that holds it, and takes them from the
	// others, each request signed with it (host/cluster); with none, a
	// conversation held by another host answers session_unavailable.
	SecretEnv  string
	SecretFile string
}

// Forwards says whether the host forwards to, and takes from, the other
// hosts sharing its store: it has a secret to sign with.
func (c ClusterConfig) Forwards() bool { return c.SecretEnv != "" || c.SecretFile != "" }

// hostIDRE is what a host_id may be: letters, digits and . _ : @ -.
var hostIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$`)

// decodeCluster reads [cluster] into c.
func (d *decoder) decodeCluster(v any, c *ClusterConfig, dir string) {
	t := d.table("cluster", v)
	if t.str("host_id", &c.HostID) && !hostIDRE.MatchString(c.HostID) {
		d.addf(t.at("host_id"), "must be 1 to 128 letters, digits and . _ : @ - (starting with a letter or digit), like \"web-1\", not %q", c.HostID)
		c.HostID = ""
	}
	if t.str("address", &c.Address) {
		if msg := checkAddress(c.Address); msg != "" {
			d.addf(t.at("address"), "%s", msg)
			c.Address = ""
		}
	}
	d.secret(t, dir, secretKeys{key: "secret", noun: "secret", the: "the hosts' shared secret", exampleEnv: "TOOLHOST_CLUSTER_SECRET"},
		&c.SecretEnv, &c.SecretFile)
	t.done()
}

// checkAddress checks [cluster] address, returning what is wrong or "".
func checkAddress(s string) string {
	if msg := checkListen(s); msg != "" {
		return msg
	}
	host, port, _ := net.SplitHostPort(s)
	if host == "" || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified() {
		return fmt.Sprintf("must name this host as the others reach it, like \"10.0.0.5:8080\" or \"toolhost-1.internal:8080\", not %q", s)
	}
	if port == "0" {
		return fmt.Sprintf("must have the port the host listens on, not 0, in %q", s)
	}
	return ""
}

// Identity is the host's [cluster] host_id and address, with their
// defaults filled in from the machine's hostname and [server] listen.
func (c *Config) Identity() (id, address string) {
	name, err := os.Hostname()
	if err != nil || name == "" {
		name = "localhost"
	}
	host, port, err := net.SplitHostPort(c.Server.Listen)
	if err != nil {
		host, port = "", "8080"
	}
	if _, err := strconv.Atoi(port); err != nil {
		port = "8080"
	}
	id, address = c.Cluster.HostID, c.Cluster.Address
	if id == "" {
		id = name + ":" + port
	}
	if address == "" {
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			host = name
		}
		address = net.JoinHostPort(host, port)
	}
	return id, address
}
