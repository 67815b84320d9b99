package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// exampleTree copies examples/toolhost.toml and examples/tools into a
// temporary folder laid out like the repository, with the pins file that
// `make build` would write, and returns the copied config's path.
func exampleTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"examples/tools", "bin/plugins"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyFile := func(from, to string) {
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copyFile("../examples/toolhost.toml", filepath.Join(root, "examples/toolhost.toml"))
	tools, _ := filepath.Glob("../examples/tools/*.toml")
	for _, f := range tools {
		copyFile(f, filepath.Join(root, "examples/tools", filepath.Base(f)))
	}
	pins := "http = \"" + hexA + "\"\n"
	if err := os.WriteFile(filepath.Join(root, "bin/pins.toml"), []byte(pins), 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "examples/toolhost.toml")
}

func TestExampleConfigLoads(t *testing.T) {
	file := exampleTree(t)
	root := filepath.Dir(filepath.Dir(file))
	c, err := Load(file)
	if err != nil {
		t.Fatalf("examples/toolhost.toml:\n%v", err)
	}
	for _, tc := range []struct{ name, got, want string }{
		{"listen", c.Server.Listen, "127.0.0.1:8080"},
		{"plugins dir", c.Plugins.Dir, filepath.Join(root, "bin/plugins")},
		{"pins file", c.Plugins.SHA256File, filepath.Join(root, "bin/pins.toml")},
		{"state dir", c.Server.StateDir, filepath.Join(root, "build/state")},
		{"pin from pins file", c.Plugins.SHA256["http"], hexA},
		{"tools dir", c.ToolsDir, filepath.Join(root, "examples/tools")},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %q, want %q", tc.name, tc.got, tc.want)
		}
	}
	// The python kind's paths, as its plugin gets them: resolved by its
	// schema against the example's folder.
	raw, err := c.KindTable("python", kindSchemas(t)["python"])
	if err != nil {
		t.Fatal(err)
	}
	var py struct {
		Runsc, Rootfs string
		SessionRootfs string `json:"session_rootfs"`
	}
	if err := json.Unmarshal(raw, &py); err != nil {
		t.Fatal(err)
	}
	if py.Runsc != filepath.Join(root, "build/bin/runsc") || py.Rootfs != filepath.Join(root, "build/rootfs") ||
		py.SessionRootfs != filepath.Join(root, "build/rootfs-sessions") {
		t.Errorf("[python] as its kind gets it: runsc %q, rootfs %q, session_rootfs %q", py.Runsc, py.Rootfs, py.SessionRootfs)
	}
	if _, errs := LoadTools(c.ToolsDir); errs != nil {
		t.Errorf("examples/tools:\n%v", errs)
	}
}

// TestExampleConfigWithoutPins: before `make build` the example names a pins
// file that is not there yet, and says what to do.
func TestExampleConfigWithoutPins(t *testing.T) {
	file := exampleTree(t)
	root := filepath.Dir(filepath.Dir(file))
	os.Remove(filepath.Join(root, "bin/pins.toml"))
	_, err := Load(file)
	if err == nil || !strings.Contains(err.Error(), "plugins.sha256_file: can't read "+root+"/bin/pins.toml: it does not exist; run `make build`") {
		t.Errorf("got %v", err)
	}
}

// TestExampleConfigDocumentsEveryKey: every key the config takes appears in
// the example, and every key set there has a comment above it giving its
// default.
func TestExampleConfigDocumentsEveryKey(t *testing.T) {
	data, err := os.ReadFile("../examples/toolhost.toml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	keys := map[string][]string{
		"":               {"tools_dir"},
		"server":         {"listen", "allowed_origins", "state_dir", "drain_seconds"},
		"plugins":        {"dir", "sha256_file", "start_timeout_seconds"},
		"plugins.sha256": nil,
		"runs":           {"keep_minutes", "max_running_per_token", "runs_per_hour_per_token", "sandbox_cpu_seconds_per_hour_per_token"},
		"log":            {"level", "format"},
		"model":          {"base_url", "model", "api_key_env", "api_key_file", "timeout_seconds", "max_tokens"},
		"approvals":      {"by", "change", "expire_minutes", "taint_uploads"},
		"sessions":       {"enabled", "who", "seconds", "disk_mb", "memory_mb", "idle_minutes", "keep_hours", "network", "package_hosts", "proxy_listen", "max_sessions_per_principal", "max_sessions", "max_transfers_per_principal", "max_transfers"},
	}
	// The built-in kinds' settings, as their schemas list them.
	schemas := kindSchemas(t)
	for _, kind := range []string{"http", "python"} {
		if schemas[kind] == nil {
			t.Fatalf("the %s kind has no config.schema.json", kind)
		}
	}
	for kind, schema := range schemas {
		schemaKeys(t, kind, schema, keys)
	}
	for table, ks := range keys {
		if table != "" && !strings.Contains(text, "\n["+table+"]\n") {
			t.Errorf("[%s] is not in the example", table)
		}
		for _, k := range ks {
			if !regexp.MustCompile(`(?m)^` + k + ` = `).MatchString(text) {
				t.Errorf("%s.%s is not set in the example", table, k)
			}
		}
	}
	for _, commented := range []string{"[[tokens]]", "max_running = ", "approver = true", "[kinds.", "[[tool]]",
		"[store]", "url = ", "password_env = ", "password_file = ", "[cluster]", "host_id = ", "address = "} {
		if !strings.Contains(text, "# "+commented) {
			t.Errorf("%s is not shown in the example", commented)
		}
	}
	lines := strings.Split(text, "\n")
	keyLine := regexp.MustCompile(`^[a-z_]+ = `)
	for i, l := range lines {
		if !keyLine.MatchString(l) {
			continue
		}
		j := i - 1
		comment := ""
		for ; j >= 0 && strings.HasPrefix(lines[j], "#"); j-- {
			comment = lines[j] + "\n" + comment
		}
		if !strings.Contains(comment, "Default: ") {
			t.Errorf("examples/toolhost.toml:%d: %q has no comment giving its default", i+1, l)
		}
	}
}

// kindSchemas reads the config schema of every built-in kind, by kind: the
// file plugins/KIND/config.schema.json its plugin serves through Describe.
func kindSchemas(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	files, err := filepath.Glob("../plugins/*/config.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]json.RawMessage{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(data) {
			t.Fatalf("%s is not JSON", f)
		}
		out[filepath.Base(filepath.Dir(f))] = data
	}
	return out
}

// schemaKeys adds the settings of schema to keys: its properties at table,
// and a property that is an object with properties as a table of its own.
func schemaKeys(t *testing.T, table string, schema json.RawMessage, keys map[string][]string) {
	t.Helper()
	var s struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		t.Fatalf("the schema of [%s]: %v", table, err)
	}
	keys[table] = append(keys[table], []string{}...)
	for k, sub := range s.Properties {
		var p struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		_ = json.Unmarshal(sub, &p)
		if len(p.Properties) > 0 {
			schemaKeys(t, table+"."+k, sub, keys)
			continue
		}
		keys[table] = append(keys[table], k)
	}
}
