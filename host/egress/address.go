package egress

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
)

// addrLabel marks the address the proxy adds to lo, so that a later start (after a crash) knows
// it as its own.
const addrLabel = "lo:toolhost"

// ensureAddress makes a an address of this machine: on lo, as a /32 labelled addrLabel, unless
// the machine has it already. It returns how to remove it again when it is ours (added now, or
// left by an earlier run of the proxy), nil otherwise.
func ensureAddress(ctx context.Context, a netip.Addr) (func(context.Context) error, error) {
	a = a.Unmap()
	if a.IsUnspecified() || a.IsLoopback() {
		return nil, nil // listening there needs nothing (and sandboxes can't reach it: runsc/sandbox says so)
	}
	if isLocalAddr(a) {
		ours, err := labelledOurs(ctx, a)
		if err != nil || !ours {
			return nil, err
		}
		return removeAddress(a), nil
	}
	if !a.Is4() {
		return nil, fmt.Errorf("the package proxy listens on an IPv4 address (the sandboxes have IPv4 only), not %s", a)
	}
	if err := ip(ctx, "addr", "add", a.String()+"/32", "dev", "lo", "label", addrLabel); err != nil {
		return nil, fmt.Errorf("adding the package proxy's address %s to this machine: %w", a, err)
	}
	return removeAddress(a), nil
}

func removeAddress(a netip.Addr) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := ip(ctx, "addr", "del", a.String()+"/32", "dev", "lo"); err != nil && !strings.Contains(err.Error(), "Cannot assign") {
			return fmt.Errorf("removing the package proxy's address %s: %w", a, err)
		}
		return nil
	}
}

// labelledOurs reports whether a is on lo with addrLabel.
func labelledOurs(ctx context.Context, a netip.Addr) (bool, error) {
	out, err := exec.CommandContext(ctx, "ip", "-j", "-4", "addr", "show", "dev", "lo").Output()
	if err != nil {
		return false, fmt.Errorf("listing the addresses of lo: %w", err)
	}
	var links []struct {
		Addrs []struct {
			Local string `json:"local"`
			Label string `json:"label"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		return false, fmt.Errorf("reading ip addr's list: %w", err)
	}
	for _, l := range links {
		for _, ad := range l.Addrs {
			if ad.Local == a.String() && ad.Label == addrLabel {
				return true, nil
			}
		}
	}
	return false, nil
}

func ip(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "ip", args...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %s: %w", strings.Join(args, " "), strings.TrimSpace(stderr.String()), err)
	}
	return nil
}
