package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/pelletier/go-toml/v2/unstable"
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
// the file if needed, and returns the line of the pin. It writes atomically where the file really is (a
// symbolic link is followed, and stays): a new file beside it, mode 0644,
// synced, then renamed over it, and the folder synced; a reader sees the
// old file or the new one, never a part.
func WritePin(path, kind, sum string) (int, error) {
	real := path
	if r, err := filepath.EvalSymlinks(path); err == nil {
		real = r
	}
	old, err := os.ReadFile(real)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("can't read the pins file %s: %w", path, err)
	}
	text, err := SetPin(path, old, kind, sum)
	if err != nil {
		return 0, err
	}
	line := 0
	if doc, errs := parseDocument(path, text); errs == nil {
		line = doc.lineAt(joinKey("", kind))
	}
	dir := filepath.Dir(real)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(real)+".new-*")
	if err != nil {
		return 0, fmt.Errorf("can't write the pins file %s: %w", path, err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(text); err != nil {
		return 0, fmt.Errorf("can't write the pins file %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return 0, fmt.Errorf("can't write the pins file %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return 0, fmt.Errorf("can't write the pins file %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return 0, fmt.Errorf("can't write the pins file %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), real); err != nil {
		return 0, fmt.Errorf("can't write the pins file %s: %w", path, err)
	}
	done = true
	if d, err := os.Open(dir); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return line, fmt.Errorf("the pins file %s was written, but its folder could not be synced to disk: %w", path, err)
		}
	}
	return line, nil
}

// PinPlace is where a kind is pinned: the file, the line and the hash.
type PinPlace struct {
	File   string
	Line   int
	SHA256 string
}

// PinsFilePin says whether the sha256_file (not the main file) pins kind,
// where and to which hash. A pins file not made yet pins nothing.
func (c *Config) PinsFilePin(kind string) (PinPlace, bool, error) {
	file := c.Plugins.SHA256File
	if file == "" {
		return PinPlace{}, false, nil
	}
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return PinPlace{}, false, nil
	}
	if err != nil {
		return PinPlace{}, false, fmt.Errorf("can't read the pins file %s: %w", file, err)
	}
	doc, errs := parseDocument(file, data)
	if errs != nil {
		return PinPlace{}, false, fmt.Errorf("the pins file %s can't be read as TOML: %w", file, errs)
	}
	sum, ok := doc.root[kind].(string)
	if !ok {
		return PinPlace{}, false, nil
	}
	return PinPlace{File: file, Line: doc.lineAt(joinKey("", kind)), SHA256: sum}, true, nil
}

// pinsTable is what the main config file has of [plugins.sha256], found
// with the TOML parser (so a line of a multi-line string that looks like
// a header or a pin is never taken for one). Lines count from 1; 0 is
// none.
type pinsTable struct {
	header  int // the line of the [plugins.sha256] header
	next    int // the line of the next header after it
	lastKey int // the last line of the table's last key
	keyLine int // the line of the table's last key (for its indent)
	kind    int // the line of kind's key in the table
	kindEnd int // and the last line of its value
	// other is how the pins are written when not as a table of their
	// own (an inline table, dotted keys), at line otherLine.
	other     string
	otherLine int
}

// findPinsTable walks the main config file's text for kind's pin.
func findPinsTable(text []byte, kind string) (pinsTable, error) {
	var newlines []int
	for i, c := range text {
		if c == '\n' {
			newlines = append(newlines, i)
		}
	}
	lineOf := func(off int) int { return sort.SearchInts(newlines, off) + 1 }
	keyOf := func(it unstable.Iterator) (parts []string, line int) {
		for it.Next() {
			k := it.Node()
			if line == 0 {
				line = lineOf(int(k.Raw.Offset))
			}
			parts = append(parts, string(k.Data))
		}
		return parts, line
	}
	pinsPath := []string{"plugins", "sha256"}
	var t pinsTable
	var p unstable.Parser
	p.Reset(text)
	var prefix []string
	in := false // within the [plugins.sha256] table
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			parts, line := keyOf(e.Key())
			if in && t.next == 0 {
				t.next = line
			}
			in = e.Kind == unstable.Table && slices.Equal(parts, pinsPath)
			if in {
				t.header = line
			} else if hasPrefix(parts, pinsPath) && t.other == "" {
				t.other, t.otherLine = "a table under it, ["+strings.Join(parts, ".")+"]", line
			}
			prefix = parts
		case unstable.KeyValue:
			parts, line := keyOf(e.Key())
			end := lineOf(int(e.Raw.Offset + e.Raw.Length - 1))
			full := append(slices.Clone(prefix), parts...)
			switch {
			case in && len(parts) == 1:
				t.lastKey, t.keyLine = end, line
				if parts[0] == kind {
					t.kind, t.kindEnd = line, end
				}
			case t.other != "":
			case in:
				t.other, t.otherLine = "dotted keys ("+strings.Join(parts, ".")+" = …)", line
			case hasPrefix(full, pinsPath):
				t.other, t.otherLine = "dotted keys or an inline table ("+strings.Join(parts, ".")+" = …)", line
			case slices.Equal(full, pinsPath[:1]):
				t.other, t.otherLine = "an inline table (plugins = { … })", line
			}
		}
	}
	if err := p.Error(); err != nil {
		return pinsTable{}, err
	}
	return t, nil
}

func hasPrefix(s, prefix []string) bool {
	return len(s) >= len(prefix) && slices.Equal(s[:len(prefix)], prefix)
}

// SetMainPin returns the main config file's text with kind pinned to sum
// in its [plugins.sha256] table, and the line of the pin. It edits lines,
// keeping every other line and comment: the kind's line in that table is
// replaced (its indent and a comment after the value kept); else the pin
// is added after the table's last key, or, in a table with no key yet,
// after the header and the comment lines right under it; a file with no
// such table gets one at its end. Pins written another way (an inline
// table, dotted keys) are refused, showing the line to add by hand.
//
// The result is checked as a whole config named file (its sha256_file is
// read too, though it may not exist yet): it must have no problems, pin
// kind to sum at the line said, and hold every other value as before;
// otherwise SetMainPin refuses and returns no text.
func SetMainPin(file string, text []byte, kind, sum string) ([]byte, int, error) {
	if !nameRE.MatchString(kind) {
		return nil, 0, fmt.Errorf("%q is not a kind name: it %s", kind, nameRule)
	}
	if !hexRE.MatchString(sum) {
		return nil, 0, fmt.Errorf("%q is not a SHA-256 in hex (64 characters 0-9a-f)", sum)
	}
	pin := fmt.Sprintf("%s = %q", kind, sum)
	byHand := func(format string, a ...any) error {
		return fmt.Errorf(format+", so toolhost does not write the pin of %s there itself: add it by hand, in [plugins.sha256], as\n    %s\nnothing was written",
			append(a, kind, pin)...)
	}
	t, err := findPinsTable(text, kind)
	if err != nil {
		return nil, 0, fmt.Errorf("%s is not valid TOML, so the pin of %s was not written: %w", file, kind, err)
	}
	if t.other != "" {
		return nil, 0, byHand("%s:%d pins plugins with %s, not in a [plugins.sha256] table of lines", file, t.otherLine, t.other)
	}
	lines, line, ok := placeMainPin(splitLines(text), t, kind, pin)
	if !ok {
		return nil, 0, byHand("%s:%d has the pin of %s written in a way toolhost does not edit", file, t.kind, kind)
	}
	out := []byte(strings.Join(lines, ""))
	if err := checkMainPin(file, text, out, kind, sum, line); err != nil {
		return nil, 0, err
	}
	return out, line, nil
}

// splitLines splits text into its lines, each with its line ending (a last
// line without one is kept as it is); an empty text has no lines.
func splitLines(text []byte) []string {
	lines := strings.SplitAfter(string(text), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// placeMainPin writes pin (kind = "sum") into the main config's lines where
// t says: over kind's pin, after the table's last key, under its header, or
// in a new [plugins.sha256] table at the end. It returns the lines and the
// pin's line, or false when kind's pin is written in a way toolhost does not
// edit.
func placeMainPin(lines []string, t pinsTable, kind, pin string) ([]string, int, bool) {
	switch {
	case t.kind != 0:
		if t.kindEnd != t.kind || !replacePinLine(lines, t.kind, kind, pin) {
			return nil, 0, false
		}
		return lines, t.kind, true
	case t.lastKey != 0:
		indent := lines[t.keyLine-1][:len(lines[t.keyLine-1])-len(strings.TrimLeft(lines[t.keyLine-1], " \t"))]
		lines, line := insertPinLine(lines, t.lastKey, indent+pin)
		return lines, line, true
	case t.header != 0:
		lines, line := insertPinLine(lines, pinsHeaderEnd(lines, t), pin)
		return lines, line, true
	default:
		if len(lines) > 0 && !strings.HasSuffix(lines[len(lines)-1], "\n") {
			lines[len(lines)-1] += "\n"
		}
		lines = append(lines, "\n", "[plugins.sha256]\n", pin+"\n")
		return lines, len(lines), true
	}
}

// replacePinLine writes pin over kind's one-line pin at line n, keeping
// what is around it (indent, comment) and its line ending; false when the
// line is not a pin of kind toolhost can edit.
func replacePinLine(lines []string, n int, kind, pin string) bool {
	body, nl := strings.CutSuffix(lines[n-1], "\n")
	body, cr := strings.CutSuffix(body, "\r")
	m := pinLineRE(kind).FindStringSubmatch(body)
	if m == nil {
		return false
	}
	lines[n-1] = m[1] + pin + m[2]
	if cr {
		lines[n-1] += "\r"
	}
	if nl {
		lines[n-1] += "\n"
	}
	return true
}

// insertPinLine puts text as a new line after line n (0: at the start),
// ending it as the line before it ends, and returns the lines and its line.
func insertPinLine(lines []string, n int, text string) ([]string, int) {
	nl := "\n"
	if n > 0 {
		if !strings.HasSuffix(lines[n-1], "\n") {
			lines[n-1] += "\n"
		}
		if strings.HasSuffix(lines[n-1], "\r\n") {
			nl = "\r\n"
		}
	}
	lines = slices.Insert(lines, n, text+nl)
	return lines, n + 1
}

// pinsHeaderEnd is the line a first pin goes after in a [plugins.sha256]
// table with no keys: under the header and the comments right under it (a
// commented example pin), unless those comments run into the next table's
// header: then they are that table's.
func pinsHeaderEnd(lines []string, t pinsTable) int {
	n := t.header
	for n < len(lines) && strings.HasPrefix(strings.TrimLeft(lines[n], " \t"), "#") {
		n++
	}
	if t.next != 0 && n+1 == t.next {
		n = t.header
	}
	return n
}

// checkMainPin checks the main config's new text: a config with no
// problems that pins kind to sum at line and is otherwise as before.
func checkMainPin(file string, before, after []byte, kind, sum string, line int) error {
	abs, err := filepath.Abs(file)
	if err != nil {
		return fmt.Errorf("can't find the config file %s: %w", file, err)
	}
	c, err := parse(file, abs, after, true)
	if err != nil {
		return fmt.Errorf("%s would have problems with the pin of %s written in, so it was left as it is: %w", file, kind, err)
	}
	if got, at, ok := c.MainFilePin(kind); !ok || got != sum || at != line || c.Plugins.SHA256[kind] != sum {
		return fmt.Errorf("%s would not pin %s to the new hash at line %d once written, so it was left as it is: add the pin by hand, in [plugins.sha256], as\n    %s = %q",
			file, kind, line, kind, sum)
	}
	old, errs := parseDocument(file, before)
	if errs != nil {
		return fmt.Errorf("%s is not valid TOML, so the pin of %s was not written: %w", file, kind, errs)
	}
	plugins, ok := old.root["plugins"].(map[string]any)
	if !ok {
		plugins = map[string]any{}
		old.root["plugins"] = plugins
	}
	pins, ok := plugins["sha256"].(map[string]any)
	if !ok {
		pins = map[string]any{}
		plugins["sha256"] = pins
	}
	pins[kind] = sum
	if !reflect.DeepEqual(old.root, c.doc.root) {
		return fmt.Errorf("%s would change in more than the pin of %s once written, so it was left as it is: add the pin by hand, in [plugins.sha256], as\n    %s = %q",
			file, kind, kind, sum)
	}
	return nil
}

// WriteMainPin pins kind to sum in the main config file at path
// (SetMainPin) and returns the line of the pin. It writes atomically where
// the file really is (a symbolic link is followed, and stays): a new file
// beside it with the old one's mode and owner, synced, then renamed over
// it, and the folder synced. If the file changes while it is written,
// nothing is written.
func WriteMainPin(path, kind, sum string) (int, error) {
	real := path
	if r, err := filepath.EvalSymlinks(path); err == nil {
		real = r
	}
	fail := func(err error) (int, error) {
		return 0, fmt.Errorf("can't write the pin of %s into the config file %s: %w; nothing was written", kind, path, err)
	}
	old, err := os.ReadFile(real)
	if err != nil {
		return fail(err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return fail(err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fail(errors.New("its owner can't be read"))
	}
	text, line, err := SetMainPin(path, old, kind, sum)
	if err != nil {
		return 0, err
	}
	dir := filepath.Dir(real)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(real)+".new-*")
	if err != nil {
		return fail(err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	// The new file is 0600 and ours until it has the old one's owner and
	// mode, so it is never readable by more than the old one.
	if _, err := tmp.Write(text); err != nil {
		return fail(err)
	}
	if tfi, err := tmp.Stat(); err != nil {
		return fail(err)
	} else if ts, ok := tfi.Sys().(*syscall.Stat_t); !ok || ts.Uid != st.Uid || ts.Gid != st.Gid {
		if err := tmp.Chown(int(st.Uid), int(st.Gid)); err != nil {
			return fail(fmt.Errorf("the new file can't be given the owner of the old one (uid %d, gid %d): %w", st.Uid, st.Gid, err))
		}
	}
	if err := tmp.Chmod(fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		return fail(err)
	}
	if now, err := os.ReadFile(real); err != nil || !bytes.Equal(now, old) {
		return fail(errors.New("the file changed while the pin was being written: run this again"))
	}
	if err := os.Rename(tmp.Name(), real); err != nil {
		return fail(err)
	}
	done = true
	if d, err := os.Open(dir); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return line, fmt.Errorf("the pin of %s was written into %s, but its folder could not be synced to disk: %w", kind, path, err)
		}
	}
	return line, nil
}
