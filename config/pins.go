package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// LoadForPins is Load for `toolhost plugins pin`, which may be the first
// to write the pins file: a sha256_file that does not exist yet is no
// error (its pins are then none). Anything else wrong is, as in Load.
func LoadForPins(path string) (*Config, error) {
	abs, data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return parse(path, abs, data, true)
}

// MainFilePin says whether the main config file itself pins kind, in
// [plugins.sha256] (not its sha256_file), with which hash and at which
// line.
func (c *Config) MainFilePin(kind string) (sum string, line int, ok bool) {
	if c.doc == nil {
		return "", 0, false
	}
	plugins, _ := c.doc.root["plugins"].(map[string]any)
	pins, _ := plugins["sha256"].(map[string]any)
	sum, ok = pins[kind].(string)
	if !ok {
		return "", 0, false
	}
	return sum, c.doc.lineAt(joinKey("plugins.sha256", kind)), true
}

// pinLineRE matches the line of one pin: its indent, the key (bare or
// quoted) and its string value, then whatever follows (a comment).
func pinLineRE(kind string) *regexp.Regexp {
	k := regexp.QuoteMeta(kind)
	return regexp.MustCompile(`^([ \t]*)(?:` + k + `|"` + k + `"|'` + k + `')[ \t]*=[ \t]*(?:"[^"]*"|'[^']*')?(.*)$`)
}

// SetPin returns a pins file's text with kind pinned to sum: the kind's
// line replaced when it has one (its indent and a comment after the value
// kept), else `kind = "sum"` added at the end. Every other line stays as
// it was. The result is checked: it must be valid TOML that pins kind to
// sum, or SetPin refuses.
func SetPin(file string, text []byte, kind, sum string) ([]byte, error) {
	if !nameRE.MatchString(kind) {
		return nil, fmt.Errorf("%q is not a kind name: it %s", kind, nameRule)
	}
	if !hexRE.MatchString(sum) {
		return nil, fmt.Errorf("%q is not a SHA-256 in hex (64 characters 0-9a-f)", sum)
	}
	re := pinLineRE(kind)
	lines := strings.SplitAfter(string(text), "\n")
	found := false
	for i, l := range lines {
		body, nl := strings.CutSuffix(l, "\n")
		m := re.FindStringSubmatch(body)
		if m == nil {
			continue
		}
		lines[i] = fmt.Sprintf("%s%s = %q%s", m[1], kind, sum, m[2])
		if nl {
			lines[i] += "\n"
		}
		found = true
	}
	out := strings.Join(lines, "")
	if !found {
		if out != "" && !strings.HasSuffix(out, "\n") {
			out += "\n"
		}
		out += fmt.Sprintf("%s = %q\n", kind, sum)
	}
	doc, errs := parseDocument(file, []byte(out))
	if errs != nil {
		return nil, fmt.Errorf("%s would not be valid TOML with the pin of %s written in, so it was left as it is: %w", file, kind, errs)
	}
	d := &decoder{doc: doc}
	pins := map[string]string{}
	d.pins(d.table("", doc.root), pins)
	if len(d.errs) > 0 {
		return nil, fmt.Errorf("%s has problems, so the pin of %s was not written; fix them first: %w", file, kind, errorsOrNil(d.errs))
	}
	if pins[kind] != sum {
		return nil, fmt.Errorf("%s does not pin %s to the new hash once written (is its line inside a table, or split?), so it was left as it is", file, kind)
	}
	return []byte(out), nil
}

// WritePin pins kind to sum in the pins file at path (SetPin), creating
// the file if needed. It writes atomically where the file really is (a
// symbolic link is followed, and stays): a new file beside it, mode 0644,
// synced, then renamed over it, and the folder synced; a reader sees the
// old file or the new one, never a part.
func WritePin(path, kind, sum string) error {
	real := path
	if r, err := filepath.EvalSymlinks(path); err == nil {
		real = r
	}
	old, err := os.ReadFile(real)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("can't read the pins file %s: %w", path, err)
	}
	text, err := SetPin(path, old, kind, sum)
	if err != nil {
		return err
	}
	dir := filepath.Dir(real)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(real)+".new-*")
	if err != nil {
		return fmt.Errorf("can't write the pins file %s: %w", path, err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(text); err != nil {
		return fmt.Errorf("can't write the pins file %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("can't write the pins file %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("can't write the pins file %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("can't write the pins file %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), real); err != nil {
		return fmt.Errorf("can't write the pins file %s: %w", path, err)
	}
	done = true
	if d, err := os.Open(dir); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return fmt.Errorf("the pins file %s was written, but its folder could not be synced to disk: %w", path, err)
		}
	}
	return nil
}
