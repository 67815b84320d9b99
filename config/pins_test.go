package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var (
	sumA = strings.Repeat("a", 64)
	sumB = strings.Repeat("b", 64)
)

// TestSetPinKeepsEveryOtherLine: the kind's line is replaced in place
// (indent and comment kept), or added at the end; comments, blank lines
// and other pins stay as they were.
func TestSetPinKeepsEveryOtherLine(t *testing.T) {
	in := "# Written by `make build`.\n\n# weather = \"" + sumA + "\"\nhttp = \"" + sumA + "\"  # the built-in one\n  \"weather\" = '" + sumA + "'\npython = \"" + sumA + "\""
	out, err := SetPin("pins.toml", []byte(in), "weather", sumB)
	if err != nil {
		t.Fatal(err)
	}
	want := "# Written by `make build`.\n\n# weather = \"" + sumA + "\"\nhttp = \"" + sumA + "\"  # the built-in one\n  weather = \"" + sumB + "\"\npython = \"" + sumA + "\""
	if string(out) != want {
		t.Fatalf("got\n%s\nwant\n%s", out, want)
	}
	out, err = SetPin("pins.toml", []byte(in), "graph", sumB)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != in+"\ngraph = \""+sumB+"\"\n" {
		t.Fatalf("added:\n%s", out)
	}
	out, err = SetPin("pins.toml", nil, "graph", sumB)
	if err != nil || string(out) != "graph = \""+sumB+"\"\n" {
		t.Fatalf("into an empty file: %q %v", out, err)
	}
	out, err = SetPin("pins.toml", []byte("http = \""+sumA+"\" # old\n"), "http", sumB)
	if err != nil || string(out) != "http = \""+sumB+"\" # old\n" {
		t.Fatalf("replaced: %q %v", out, err)
	}
}

// TestSetPinRefusesWhatItCantWriteSafely: a bad kind or hash, a file that
// is not valid TOML, and a pins file with a table (where the new line
// would not pin the kind) are refused, and nothing is returned to write.
func TestSetPinRefusesWhatItCantWriteSafely(t *testing.T) {
	for _, c := range []struct{ text, kind, sum, want string }{
		{"", "Bad-Kind", sumA, "is not a kind name"},
		{"", "http", "abc", "is not a SHA-256"},
		{"http = \n", "graph", sumA, "not be valid TOML"},
		{"[more]\nx = 1\n", "graph", sumA, "has problems"},
		{"evil = \"\"\"\nhttp = \"x\"\n\"\"\"\n", "http", sumA, "was not written"},
	} {
		out, err := SetPin("pins.toml", []byte(c.text), c.kind, c.sum)
		if err == nil || !strings.Contains(err.Error(), c.want) || out != nil {
			t.Errorf("SetPin(%q, %s): %q, %v; want an error saying %q", c.text, c.kind, out, err, c.want)
		}
	}
}

// TestWritePinIsAtomicAndKeepsTheLink: the file is replaced whole (mode
// 0644), through a symbolic link to where it really is, leaving no
// temporary file; a missing file is created.
func TestWritePinIsAtomicAndKeepsTheLink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.toml")
	if err := os.WriteFile(real, []byte("# pins\nhttp = \""+sumA+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "pins.toml")
	if err := os.Symlink("real.toml", link); err != nil {
		t.Fatal(err)
	}
	if line, err := WritePin(link, "weather", sumB); err != nil || line != 3 {
		t.Fatalf("WritePin: line %d, %v", line, err)
	}
	b, err := os.ReadFile(real)
	if err != nil || string(b) != "# pins\nhttp = \""+sumA+"\"\nweather = \""+sumB+"\"\n" {
		t.Fatalf("real file: %q %v", b, err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v %v", fi, err)
	}
	if fi, _ := os.Stat(real); fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode %04o, want 0644", fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Fatalf("left behind: %v", entries)
	}
	fresh := filepath.Join(dir, "fresh.toml")
	if _, err := WritePin(fresh, "http", sumA); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(fresh); string(b) != "http = \""+sumA+"\"\n" {
		t.Fatalf("fresh: %q", b)
	}
}

// TestLoadForPinsAndMainFilePin: a pins file not yet made is no error for
// LoadForPins (it is for Load); MainFilePin finds the main file's own
// pin and its line, not the pins file's.
func TestLoadForPinsAndMainFilePin(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "toolhost.toml")
	body := "[plugins]\ndir = \"plugins\"\nsha256_file = \"pins.toml\"\n\n[plugins.sha256]\n# a comment\nweather = \"" + sumA + "\"\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil {
		t.Fatal("Load took a missing sha256_file")
	}
	c, err := LoadForPins(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Plugins.SHA256File != filepath.Join(dir, "pins.toml") || c.Plugins.SHA256["weather"] != sumA {
		t.Fatalf("config: %+v", c.Plugins)
	}
	if sum, line, ok := c.MainFilePin("weather"); !ok || sum != sumA || line != 7 {
		t.Fatalf("MainFilePin(weather) = %s, %d, %v", sum, line, ok)
	}
	if err := os.WriteFile(filepath.Join(dir, "pins.toml"), []byte("http = \""+sumB+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err = LoadForPins(path)
	if err != nil || c.Plugins.SHA256["http"] != sumB {
		t.Fatalf("with the pins file: %v %v", c, err)
	}
	if _, _, ok := c.MainFilePin("http"); ok {
		t.Fatal("MainFilePin found the pins file's pin")
	}
}
