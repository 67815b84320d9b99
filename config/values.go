package config

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

var (
	tableHeaderLine = regexp.MustCompile(`^\[([A-Za-z0-9_.]+)\]\s*(#.*)?$`)
	simpleKeyLine   = regexp.MustCompile(`^([A-Za-z0-9_]+)\s*=`)
)

// SetValues returns a config file's text with the values of keys replaced
// and every other line, comments included, as it was. A key is
// "table.key", ".key" for the top level; a value is a TOML literal
// (`"text"`, `true`, `10`). Only `key = value` lines at the start of a line
// under a `[table]` header are changed; a key with no such line is an
// error naming it. It is how the installed config and the tests' configs
// are made from examples/toolhost.toml.
func SetValues(text string, values map[string]string) (string, error) {
	lines := strings.Split(text, "\n")
	table := ""
	done := map[string]bool{}
	for i, line := range lines {
		if m := tableHeaderLine.FindStringSubmatch(line); m != nil {
			table = m[1]
		} else if m := simpleKeyLine.FindStringSubmatch(line); m != nil {
			key := table + "." + m[1]
			if v, ok := values[key]; ok {
				lines[i] = m[1] + " = " + v
				done[key] = true
			}
		}
	}
	var missing []string
	for k := range values {
		if !done[k] {
			missing = append(missing, strings.TrimPrefix(k, "."))
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return "", fmt.Errorf("the config sets no %s (a `key = value` line of its own, not commented out)", strings.Join(missing, ", "))
	}
	return strings.Join(lines, "\n"), nil
}
