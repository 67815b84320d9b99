package config

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// exampleSite copies examples/toolhost.toml into dir/etc, so its relative
// paths (../bin/plugins, ../bin/pins.toml, ../build/...) point into dir,
// and writes dir/bin/pins.toml with pins (the package's file).
func exampleSite(t *testing.T, pins string) (dir, config, pinsFile string) {
	t.Helper()
	dir = t.TempDir()
	for _, d := range []string{"etc", "bin/plugins"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile("../examples/toolhost.toml")
	if err != nil {
		t.Fatal(err)
	}
	config = filepath.Join(dir, "etc", "toolhost.toml")
	if err := os.WriteFile(config, b, 0o640); err != nil {
		t.Fatal(err)
	}
	pinsFile = filepath.Join(dir, "bin", "pins.toml")
	if err := os.WriteFile(pinsFile, []byte(pins), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, config, pinsFile
}

// TestWriteMainPinIntoTheExampleSurvivesAnUpgrade: a third-party kind's
// pin goes into the example config's [plugins.sha256], right under its
// commented example line, every other line kept; the file keeps its mode
// 0640 and owner. The pins file is then replaced wholesale, as an
// upgrade does, and the config still pins the kind.
func TestWriteMainPinIntoTheExampleSurvivesAnUpgrade(t *testing.T) {
	_, config, pinsFile := exampleSite(t, "# the package's pins\nhttp = \""+sumA+"\"\n")
	if err := os.Chown(config, 0, 4242); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(config)
	line, err := WriteMainPin(config, "weather", sumB)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(config)
	pin := "weather = \"" + sumB + "\"\n"
	comment := "[plugins.sha256]\n# weather = \"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"\n"
	if want := strings.Replace(string(before), comment, comment+pin, 1); string(after) != want {
		t.Fatalf("the config is not the example with the pin under the commented line:\n%s", after)
	}
	if got := strings.Split(string(after), "\n")[line-1]; got+"\n" != pin {
		t.Fatalf("line %d is %q, not the pin", line, got)
	}
	fi, err := os.Stat(config)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o640 || st.Uid != 0 || st.Gid != 4242 {
		t.Fatalf("the config is now mode %04o, owner %d:%d; want 0640, 0:4242", fi.Mode().Perm(), st.Uid, st.Gid)
	}
	if b, _ := os.ReadFile(pinsFile); string(b) != "# the package's pins\nhttp = \""+sumA+"\"\n" {
		t.Fatalf("the pins file changed: %q", b)
	}
	// An upgrade replaces the pins file with the package's own.
	if err := os.WriteFile(pinsFile, []byte("# new package\nhttp = \""+sumB+"\"\npython = \""+sumA+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(config)
	if err != nil {
		t.Fatal(err)
	}
	if c.Plugins.SHA256["weather"] != sumB || c.Plugins.SHA256["http"] != sumB {
		t.Fatalf("after the upgrade: %v", c.Plugins.SHA256)
	}
	// Pinning it again replaces its line in place.
	if line2, err := WriteMainPin(config, "weather", sumA); err != nil || line2 != line {
		t.Fatalf("re-pin: line %d, %v", line2, err)
	}
	again, _ := os.ReadFile(config)
	if string(again) != strings.Replace(string(after), sumB, sumA, 1) {
		t.Fatalf("re-pin changed more than the hash:\n%s", again)
	}
	entries, _ := os.ReadDir(filepath.Dir(config))
	if len(entries) != 1 {
		t.Fatalf("left behind: %v", entries)
	}
}

// TestSetMainPinPlacesThePin: after the table's last pin (indent kept,
// comments kept); the kind's own line replaced (its comment kept); a
// table with no [plugins.sha256] gets one at its end; comments under a
// header that run into the next header stay with it.
func TestSetMainPinPlacesThePin(t *testing.T) {
	const f = "toolhost.toml"
	for _, c := range []struct{ name, in, want string }{
		{"after the last pin",
			"# top\n[plugins.sha256]\n# http is built in\n  graph = \"" + sumA + "\" # drawn\n\n# [http] next\n[http]\n",
			"# top\n[plugins.sha256]\n# http is built in\n  graph = \"" + sumA + "\" # drawn\n  weather = \"" + sumB + "\"\n\n# [http] next\n[http]\n"},
		{"its own line",
			"[plugins.sha256]\n\"weather\" = '" + sumA + "'   # by hand\ngraph = \"" + sumA + "\"\n",
			"[plugins.sha256]\nweather = \"" + sumB + "\"   # by hand\ngraph = \"" + sumA + "\"\n"},
		{"no table",
			"[plugins]\ndir = \"p\" # kept",
			"[plugins]\ndir = \"p\" # kept\n\n[plugins.sha256]\nweather = \"" + sumB + "\"\n"},
		{"empty file", "", "\n[plugins.sha256]\nweather = \"" + sumB + "\"\n"},
		{"comments of the next table",
			"[plugins.sha256]\n# [http]: its settings\n[http]\n",
			"[plugins.sha256]\nweather = \"" + sumB + "\"\n# [http]: its settings\n[http]\n"},
		{"crlf",
			"[plugins.sha256]\r\ngraph = \"" + sumA + "\"\r\n",
			"[plugins.sha256]\r\ngraph = \"" + sumA + "\"\r\nweather = \"" + sumB + "\"\r\n"},
	} {
		out, line, err := SetMainPin(f, []byte(c.in), "weather", sumB)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if string(out) != c.want {
			t.Errorf("%s: got\n%q\nwant\n%q", c.name, out, c.want)
		}
		if l := strings.Split(string(out), "\n"); line < 1 || line > len(l) || !strings.Contains(l[line-1], sumB) {
			t.Errorf("%s: line %d is not the pin", c.name, line)
		}
	}
}

// TestSetMainPinRefusesPinsWrittenAnotherWay: an inline table, dotted
// keys or an inline [plugins] are refused, showing the line to add by
// hand; so is a result that would not be a good config (a pins file
// pinning the kind to another hash).
func TestSetMainPinRefusesPinsWrittenAnotherWay(t *testing.T) {
	pin := "weather = \"" + sumB + "\""
	for _, c := range []struct{ name, in, want string }{
		{"inline table", "[plugins]\nsha256 = { graph = \"" + sumA + "\" }\n", "toolhost.toml:2 pins plugins with dotted keys or an inline table"},
		{"dotted keys", "[plugins]\nsha256.graph = \"" + sumA + "\"\n", "toolhost.toml:2 pins plugins with dotted keys"},
		{"dotted at the top", "plugins.sha256.graph = \"" + sumA + "\"\n", "toolhost.toml:1 pins plugins with dotted keys"},
		{"inline plugins", "plugins = { dir = \"p\" }\n", "toolhost.toml:1 pins plugins with an inline table"},
		{"dotted in the table", "[plugins.sha256]\nweather.x = \"" + sumA + "\"\n", "toolhost.toml:2 pins plugins with dotted keys"},
	} {
		out, _, err := SetMainPin("toolhost.toml", []byte(c.in), "weather", sumB)
		if err == nil || out != nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "by hand") || !strings.Contains(err.Error(), "\n    "+pin+"\n") {
			t.Errorf("%s: %q, %v; want a refusal saying %q and showing %s", c.name, out, err, c.want, pin)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pins.toml"), []byte("weather = \""+sumA+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "toolhost.toml")
	out, _, err := SetMainPin(file, []byte("[plugins]\nsha256_file = \"pins.toml\"\n"), "weather", sumB)
	if err == nil || out != nil || !strings.Contains(err.Error(), "pinned to a different hash") {
		t.Fatalf("a pin the pins file contradicts: %q, %v", out, err)
	}
}

// TestSetMainPinIsNotFooledByAMultiLineString: a tool's code holding
// lines that look like [plugins.sha256] and a pin is left exactly as it
// is; the pin goes into the real table.
func TestSetMainPinIsNotFooledByAMultiLineString(t *testing.T) {
	in := "[[tool]]\nname = \"t\"\ndescription = \"d\"\n[tool.run]\ntype = \"python\"\ncode = '''\n[plugins.sha256]\nweather = \"" + sumA + "\"\n'''\n\n[plugins.sha256]\n# none yet\n\n[http]\n"
	out, line, err := SetMainPin("toolhost.toml", []byte(in), "weather", sumB)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(in, "# none yet\n", "# none yet\nweather = \""+sumB+"\"\n", 1)
	if string(out) != want || line != 13 {
		t.Fatalf("line %d:\n%s", line, out)
	}
}
