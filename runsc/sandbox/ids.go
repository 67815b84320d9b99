package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
)

// DefaultPrefix starts the name of everything toolhost makes on the host for a sandbox.
const DefaultPrefix = "toolhost-"

// idSuffixLen is the width of the random part of every id. It never varies: runsc matches ids by
// prefix, so "x1" would become ambiguous once "x10" existed.
const idSuffixLen = 10

// MaxPrefixLen is the longest prefix: ids also name iptables chains, which take 28 characters.
const MaxPrefixLen = 28 - idSuffixLen

var prefixRx = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

// CheckPrefix says whether prefix can start sandbox ids: 1 to MaxPrefixLen lower-case letters,
// digits, '-' and '_', starting with a letter.
func CheckPrefix(prefix string) error {
	if !prefixRx.MatchString(prefix) || len(prefix) > MaxPrefixLen {
		return fmt.Errorf("the sandbox prefix %q must be 1 to %d of a-z, 0-9, '-' and '_', starting with a letter", prefix, MaxPrefixLen)
	}
	return nil
}

// NewID returns prefix followed by idSuffixLen random hex digits.
func NewID(prefix string) (string, error) {
	b := make([]byte, idSuffixLen/2)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making a sandbox id: %w", err)
	}
	return prefix + hex.EncodeToString(b), nil
}

// ownedBy reports whether name is an id made by NewID with prefix.
func ownedBy(name, prefix string) bool {
	if !strings.HasPrefix(name, prefix) || len(name) != len(prefix)+idSuffixLen {
		return false
	}
	_, err := hex.DecodeString(name[len(prefix):])
	return err == nil
}
