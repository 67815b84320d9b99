package config

import (
	"os"
	"testing"
)

func TestClusterDefaults(t *testing.T) {
	name, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ src, id, address string }{
		{"# nothing\n", name + ":8080", "127.0.0.1:8080"},
		{"[server]\nlisten = \"0.0.0.0:9000\"\n", name + ":9000", name + ":9000"},
		{"[server]\nlisten = \"[::]:9000\"\n", name + ":9000", name + ":9000"},
		{"[server]\nlisten = \":9001\"\n", name + ":9001", name + ":9001"},
		{"[server]\nlisten = \"10.0.0.5:8081\"\n[cluster]\nhost_id = \"web-1\"\n", "web-1", "10.0.0.5:8081"},
		{"[server]\nlisten = \"0.0.0.0:8080\"\n[cluster]\naddress = \"toolhost-1.internal:8443\"\n", name + ":8080", "toolhost-1.internal:8443"},
	} {
		c, err := Parse("/etc/toolhost/toolhost.toml", []byte(tc.src))
		if err != nil {
			t.Fatalf("%q: %v", tc.src, err)
		}
		if id, addr := c.Identity(); id != tc.id || addr != tc.address {
			t.Errorf("%q: identity %q at %q, want %q at %q", tc.src, id, addr, tc.id, tc.address)
		}
	}
}

func TestClusterEverySetting(t *testing.T) {
	c, err := Parse("/etc/toolhost/toolhost.toml", []byte("[cluster]\nhost_id = \"web-1.eu:8080\"\naddress = \"[fd00::5]:8080\"\nsecret_file = \"cluster.secret\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := ClusterConfig{HostID: "web-1.eu:8080", Address: "[fd00::5]:8080", SecretFile: "/etc/toolhost/cluster.secret"}
	if c.Cluster != want {
		t.Errorf("[cluster] = %+v, want %+v", c.Cluster, want)
	}
	if !c.Cluster.Forwards() {
		t.Error("a host with secret_file does not forward")
	}
	c, err = Parse("/etc/toolhost/toolhost.toml", []byte("[cluster]\nsecret_env = \"TOOLHOST_CLUSTER_SECRET\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Cluster.SecretEnv != "TOOLHOST_CLUSTER_SECRET" || !c.Cluster.Forwards() {
		t.Errorf("[cluster] secret_env: %+v", c.Cluster)
	}
	if (ClusterConfig{}).Forwards() {
		t.Error("a host with no secret forwards")
	}
}

func TestClusterErrors(t *testing.T) {
	tests := []struct{ name, toml, want string }{
		{"host_id empty", "[cluster]\nhost_id = \"\"\n",
			`toolhost.toml:2: cluster.host_id: must be 1 to 128 letters, digits and . _ : @ - (starting with a letter or digit), like "web-1", not ""`},
		{"host_id with a space", "[cluster]\n\nhost_id = \"web 1\"\n",
			`toolhost.toml:3: cluster.host_id: must be 1 to 128 letters, digits and . _ : @ - (starting with a letter or digit), like "web-1", not "web 1"`},
		{"address without a port", "[cluster]\naddress = \"10.0.0.5\"\n",
			`toolhost.toml:2: cluster.address: must be host:port, like "127.0.0.1:8080", not "10.0.0.5"`},
		{"address on every interface", "[cluster]\naddress = \"0.0.0.0:8080\"\n",
			`toolhost.toml:2: cluster.address: must name this host as the others reach it, like "10.0.0.5:8080" or "toolhost-1.internal:8080", not "0.0.0.0:8080"`},
		{"address without a host", "[cluster]\naddress = \":8080\"\n",
			`toolhost.toml:2: cluster.address: must name this host as the others reach it, like "10.0.0.5:8080" or "toolhost-1.internal:8080", not ":8080"`},
		{"address port 0", "[cluster]\naddress = \"web-1:0\"\n",
			`toolhost.toml:2: cluster.address: must have the port the host listens on, not 0, in "web-1:0"`},
		{"not a string", "[cluster]\nhost_id = 7\n", `toolhost.toml:2: cluster.host_id: must be a string, not a whole number`},
		{"unknown key", "[cluster]\nhost = \"web-1\"\n", `toolhost.toml:2: cluster: unknown key "host" (did you mean "host_id"?)`},
		{"the secret inline", "[cluster]\nsecret = \"hunter2\"\n",
			`toolhost.toml:2: cluster.secret: the hosts' shared secret must not be written in the config: put it in an environment variable and name that in secret_env, or in a file only the host's user can read and name that in secret_file`},
		{"secret_env holding a secret", "[cluster]\nsecret_env = \"ab cd\"\n",
			`toolhost.toml:2: cluster.secret_env: must be the name of an environment variable that holds the secret (letters, digits and underscores, e.g. "TOOLHOST_CLUSTER_SECRET"), not the secret itself`},
		{"not a table", "cluster = \"web-1\"\n", `toolhost.toml:1: cluster: must be a table, not a string`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("toolhost.toml", []byte(tt.toml))
			assertErrors(t, err, tt.want)
		})
	}
}
