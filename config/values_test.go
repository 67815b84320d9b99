package config

import (
	"strings"
	"testing"
)

// TestSetValuesChangesOnlyTheKeysItIsGiven: the values of the keys given are replaced in their
// own tables, comments and every other line (a commented-out key, the same key in another
// table) stay, and a key the text does not set is an error naming it.
func TestSetValuesChangesOnlyTheKeysItIsGiven(t *testing.T) {
	text := "# top\ntools_dir = \"tools\"\n\n[server]\n# state_dir = \"commented\"\nstate_dir = \"../state\" \n[python]\nstate_dir = \"../runsc\"\n"
	got, err := SetValues(text, map[string]string{".tools_dir": `"/etc/t"`, "server.state_dir": `"/var/s"`})
	if err != nil {
		t.Fatal(err)
	}
	want := "# top\ntools_dir = \"/etc/t\"\n\n[server]\n# state_dir = \"commented\"\nstate_dir = \"/var/s\"\n[python]\nstate_dir = \"../runsc\"\n"
	if got != want {
		t.Errorf("SetValues gave\n%s\nwant\n%s", got, want)
	}
	_, err = SetValues(text, map[string]string{"log.format": `"json"`, "server.listen": `"x"`})
	if err == nil || !strings.Contains(err.Error(), "log.format, server.listen") {
		t.Errorf("keys the text does not set: %v; want an error naming them", err)
	}
}
