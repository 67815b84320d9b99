package egress

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// CheckHosts checks a package_hosts list: each entry a host name ("pypi.org") or "*." and a
// domain ("*.pythonhosted.org": every name below it), in ASCII (an internationalised name in
// its xn-- form), not an address. The error names the entry and says what to write.
func CheckHosts(hosts []string) error {
	for i, h := range hosts {
		if err := checkHost(h); err != nil {
			return fmt.Errorf("package_hosts[%d] %q: %w", i, h, err)
		}
	}
	return nil
}

func checkHost(h string) error {
	name := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
	if name == "" || name == "*" {
		return fmt.Errorf("write a host name such as \"pypi.org\" or \"*.pythonhosted.org\"")
	}
	if _, err := netip.ParseAddr(strings.Trim(name, "[]")); err == nil {
		return fmt.Errorf("the package proxy reaches host names, not addresses: write the package index's host name")
	}
	name = strings.TrimPrefix(name, "*.")
	if strings.Contains(name, "*") {
		return fmt.Errorf("a wildcard may only start the name, as in \"*.pythonhosted.org\"")
	}
	if len(name) > 253 {
		return fmt.Errorf("a host name has at most 253 characters")
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("each part of a host name between dots has 1 to 63 characters")
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("a part of a host name neither starts nor ends with \"-\"")
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("a host name has letters, digits, \"-\" and dots only (an internationalised name in its xn-- form)")
			}
		}
	}
	return nil
}

// normalizeHosts lowercases names, drops trailing dots and duplicates, and sorts them.
func normalizeHosts(hosts []string) []string {
	out := make([]string, 0, len(hosts))
	for _, h := range hosts {
		out = append(out, strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), "."))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// hostAllowed reports whether host (lowercase, no trailing dot) matches one of the normalised
// entries: the same name, or a name below the domain of a "*." entry.
func hostAllowed(entries []string, host string) bool {
	if host == "" {
		return false
	}
	for _, e := range entries {
		if d, ok := strings.CutPrefix(e, "*."); ok {
			if strings.HasSuffix(host, "."+d) {
				return true
			}
		} else if host == e {
			return true
		}
	}
	return false
}
