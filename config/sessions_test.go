package config

import (
	"reflect"
	"testing"
)

func TestSessionsDefaults(t *testing.T) {
	for _, src := range []string{"# nothing\n", "[sessions]\n"} {
		c, err := Parse("/etc/toolhost/toolhost.toml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		want := SessionsConfig{Who: "editors", Seconds: 60, DiskMB: 1024, MemoryMB: 512, IdleMinutes: 15, KeepHours: 24,
			Network: "off", PackageHosts: []string{},
			MaxSessionsPerPrincipal: 20, MaxSessions: 200, MaxTransfersPerPrincipal: 4, MaxTransfers: 16}
		if !reflect.DeepEqual(c.Sessions, want) {
			t.Errorf("%q: [sessions] = %+v, want %+v", src, c.Sessions, want)
		}
	}
}

func TestSessionsEverySetting(t *testing.T) {
	src := `[sessions]
enabled = true
who = "admins"
seconds = 600
disk_mb = 16
memory_mb = 2048
idle_minutes = 1
keep_hours = 8760
network = "packages"
package_hosts = ["pypi.org", "*.pythonhosted.org", "registry.npmjs.org", "pkgs.test"]
proxy_listen = "10.200.0.1:3128"
max_sessions_per_principal = 3
max_sessions = 100000
max_transfers_per_principal = 1
max_transfers = 4096
`
	c, err := Parse("/etc/toolhost/toolhost.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := SessionsConfig{Enabled: true, Who: "admins", Seconds: 600, DiskMB: 16, MemoryMB: 2048, IdleMinutes: 1, KeepHours: 8760,
		Network: "packages", PackageHosts: []string{"pypi.org", "*.pythonhosted.org", "registry.npmjs.org", "pkgs.test"},
		ProxyListen: "10.200.0.1:3128", MaxSessionsPerPrincipal: 3, MaxSessions: 100000, MaxTransfersPerPrincipal: 1, MaxTransfers: 4096}
	if !reflect.DeepEqual(c.Sessions, want) {
		t.Errorf("[sessions] = %+v, want %+v", c.Sessions, want)
	}
	c, err = Parse("/etc/toolhost/toolhost.toml", []byte("[sessions]\nproxy_listen = \"[fd00::1]:0\"\nnetwork = \"web\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Sessions.ProxyListen != "[fd00::1]:0" || c.Sessions.Network != "web" {
		t.Errorf("[sessions] = %+v", c.Sessions)
	}
}

func TestSessionsErrors(t *testing.T) {
	tests := []struct {
		name string
		toml string
		want string
	}{
		{"enabled type", "[sessions]\nenabled = \"yes\"\n", `toolhost.toml:2: sessions.enabled: must be true or false, not a string`},
		{"who", "[sessions]\nwho = \"viewers\"\n", `toolhost.toml:2: sessions.who: must be one of "editors", "admins", not "viewers"`},
		{"seconds low", "[sessions]\nseconds = 0\n", `toolhost.toml:2: sessions.seconds: must be from 1 to 600, not 0`},
		{"seconds high", "[sessions]\nseconds = 601\n", `toolhost.toml:2: sessions.seconds: must be from 1 to 600, not 601`},
		{"disk", "[sessions]\ndisk_mb = 8\n", `toolhost.toml:2: sessions.disk_mb: must be from 16 to 1048576, not 8`},
		{"memory low", "[sessions]\nmemory_mb = 32\n", `toolhost.toml:2: sessions.memory_mb: must be from 64 to 65536, not 32`},
		{"memory", "[sessions]\nmemory_mb = 70000\n", `toolhost.toml:2: sessions.memory_mb: must be from 64 to 65536, not 70000`},
		{"idle", "[sessions]\nidle_minutes = 0\n", `toolhost.toml:2: sessions.idle_minutes: must be from 1 to 1440, not 0`},
		{"keep", "[sessions]\nkeep_hours = 0\n", `toolhost.toml:2: sessions.keep_hours: must be from 1 to 8760, not 0`},
		{"keep decimal", "[sessions]\nkeep_hours = 2.0\n", `toolhost.toml:2: sessions.keep_hours: must be a whole number, not a decimal number (write 2, without the ".0")`},
		{"sessions per principal", "[sessions]\nmax_sessions_per_principal = 0\n", `toolhost.toml:2: sessions.max_sessions_per_principal: must be from 1 to 10000, not 0`},
		{"sessions", "[sessions]\nwho = \"editors\"\nmax_sessions = 100001\n", `toolhost.toml:3: sessions.max_sessions: must be from 1 to 100000, not 100001`},
		{"sessions type", "[sessions]\nmax_sessions = \"200\"\n", `toolhost.toml:2: sessions.max_sessions: must be a whole number, not a string`},
		{"transfers per principal", "[sessions]\nmax_transfers_per_principal = 1025\n", `toolhost.toml:2: sessions.max_transfers_per_principal: must be from 1 to 1024, not 1025`},
		{"transfers", "[sessions]\nmax_transfers = -1\n", `toolhost.toml:2: sessions.max_transfers: must be from 1 to 4096, not -1`},
		{"network", "[sessions]\nnetwork = \"on\"\n", `toolhost.toml:2: sessions.network: must be one of "off", "web", "packages", not "on"`},
		{"packages without hosts", "[sessions]\nnetwork = \"packages\"\n",
			`toolhost.toml:2: sessions.network: new sessions would reach only the hosts of package_hosts, and it lists none: list your package index's hosts there (e.g. ["pypi.org", "files.pythonhosted.org"]), or make new sessions "off"`},
		{"hosts not a list", "[sessions]\npackage_hosts = \"pypi.org\"\n", `toolhost.toml:2: sessions.package_hosts: must be a list, not a string`},
		{"host type", "[sessions]\npackage_hosts = [\"pypi.org\", 3]\n", `toolhost.toml:2: sessions.package_hosts[1]: must be a string, not a whole number`},
		{"host empty", "[sessions]\npackage_hosts = [\"\"]\n", `toolhost.toml:2: sessions.package_hosts[0]: must not be empty: write a host name like "pypi.org", or "*.example.org" for every name under example.org`},
		{"host url", "[sessions]\npackage_hosts = [\n  \"pypi.org\",\n  \"https://pypi.org/simple\",\n]\n",
			`toolhost.toml:4: sessions.package_hosts[1]: must be a host name like "pypi.org", or "*.example.org" for every name under example.org, without a scheme, port or path, not "https://pypi.org/simple"`},
		{"host port", "[sessions]\npackage_hosts = [\"pypi.org:443\"]\n",
			`toolhost.toml:2: sessions.package_hosts[0]: must be a host name like "pypi.org", or "*.example.org" for every name under example.org, without a scheme, port or path, not "pypi.org:443"`},
		{"host ip", "[sessions]\npackage_hosts = [\"10.0.0.5\"]\n",
			`toolhost.toml:2: sessions.package_hosts[0]: "10.0.0.5" is an address: give the host's name, which the proxy resolves itself (it never lets a sandbox reach private or host addresses)`},
		{"host ipv6", "[sessions]\npackage_hosts = [\"::1\"]\n",
			`toolhost.toml:2: sessions.package_hosts[0]: "::1" is an address: give the host's name, which the proxy resolves itself (it never lets a sandbox reach private or host addresses)`},
		{"host upper", "[sessions]\npackage_hosts = [\"PyPI.org\"]\n", `toolhost.toml:2: sessions.package_hosts[0]: must be written in lowercase: "pypi.org"`},
		{"host dot", "[sessions]\npackage_hosts = [\"pypi.org.\"]\n", `toolhost.toml:2: sessions.package_hosts[0]: write the name without its final dot: "pypi.org"`},
		{"host star inside", "[sessions]\npackage_hosts = [\"files.*.org\"]\n", `toolhost.toml:2: sessions.package_hosts[0]: a wildcard may only start the name, as "*." followed by a domain: not "files.*.org"`},
		{"host star alone", "[sessions]\npackage_hosts = [\"*\"]\n", `toolhost.toml:2: sessions.package_hosts[0]: a wildcard may only start the name, as "*." followed by a domain: not "*"`},
		{"host star tld", "[sessions]\npackage_hosts = [\"*.org\"]\n", `toolhost.toml:2: sessions.package_hosts[0]: "*.org" would let through every name under .org: name a domain of at least two parts, like "*.example.org"`},
		{"host label", "[sessions]\npackage_hosts = [\"-bad.example.org\"]\n",
			`toolhost.toml:2: sessions.package_hosts[0]: must be a host name like "pypi.org", or "*.example.org" for every name under example.org, not "-bad.example.org": each part between dots is 1 to 63 letters, digits or hyphens, not starting or ending with a hyphen`},
		{"host underscore", "[sessions]\npackage_hosts = [\"a_b.example.org\"]\n",
			`toolhost.toml:2: sessions.package_hosts[0]: must be a host name like "pypi.org", or "*.example.org" for every name under example.org, not "a_b.example.org": each part between dots is 1 to 63 letters, digits or hyphens, not starting or ending with a hyphen`},
		{"host twice", "[sessions]\npackage_hosts = [\"pypi.org\", \"pypi.org\"]\n", `toolhost.toml:2: sessions.package_hosts[1]: "pypi.org" is already package_hosts[0]`},
		{"proxy host name", "[sessions]\nproxy_listen = \"localhost:3128\"\n",
			`toolhost.toml:2: sessions.proxy_listen: must be an IP address and port the sandboxes can reach, like "10.200.0.1:3128" (or "" to let the host pick one), not "localhost:3128"`},
		{"proxy no port", "[sessions]\nproxy_listen = \"10.0.0.1\"\n",
			`toolhost.toml:2: sessions.proxy_listen: must be an IP address and port the sandboxes can reach, like "10.200.0.1:3128" (or "" to let the host pick one), not "10.0.0.1"`},
		{"unknown key", "[sessions]\nkeep_hour = 3\n", `toolhost.toml:2: sessions: unknown key "keep_hour" (did you mean "keep_hours"?)`},
		{"not a table", "sessions = true\n", `toolhost.toml:1: sessions: must be a table, not true or false`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("toolhost.toml", []byte(tt.toml))
			assertErrors(t, err, tt.want)
		})
	}
}

// TestExampleSessions: the example config's [sessions] is the defaults.
func TestExampleSessions(t *testing.T) {
	c, err := Load(exampleTree(t))
	if err != nil {
		t.Fatal(err)
	}
	if want := Default().Sessions; !reflect.DeepEqual(c.Sessions, want) {
		t.Errorf("the example's [sessions] = %+v, want the defaults %+v", c.Sessions, want)
	}
}
