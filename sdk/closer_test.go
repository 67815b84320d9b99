package sdk_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/hostside"
)

// TestServeClosesTheKindHoweverThePluginStops runs a real plugin process
// (testdata/closer-kind) and stops it the two ways it is stopped in
// production: by the host (go-plugin's graceful Kill) and by SIGTERM
// (systemctl stop signals every process of the unit). Both times Serve
// calls the kind's Close, with a deadline, before the process ends.
func TestServeClosesTheKindHoweverThePluginStops(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "closer-kind")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/closer-kind").CombinedOutput(); err != nil {
		t.Fatalf("building the test kind: %v\n%s", err, out)
	}
	start := func(t *testing.T) (*plugin.Client, *exec.Cmd, string) {
		file := filepath.Join(t.TempDir(), "closed")
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "CLOSER_KIND_FILE="+file)
		client := plugin.NewClient(&plugin.ClientConfig{
			HandshakeConfig:  sdk.Handshake,
			VersionedPlugins: hostside.PluginSets(nil),
			Cmd:              cmd,
			AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
			Logger:           hclog.NewNullLogger(),
		})
		t.Cleanup(client.Kill)
		rpc, err := client.Client()
		if err != nil {
			t.Fatalf("starting the test kind: %v", err)
		}
		raw, err := rpc.Dispense(sdk.PluginName)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := raw.(*hostside.KindClient).Describe(context.Background()); err != nil {
			t.Fatal(err)
		}
		return client, cmd, file
	}
	closed := func(t *testing.T, file string) {
		t.Helper()
		b, err := os.ReadFile(file)
		if err != nil || string(b) != "closed" {
			t.Fatalf("the kind was not closed (with a deadline): %q, %v", b, err)
		}
	}

	t.Run("by the host", func(t *testing.T) {
		client, _, file := start(t)
		client.Kill()
		closed(t, file)
	})
	t.Run("by SIGTERM", func(t *testing.T) {
		client, cmd, file := start(t)
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		// Bounded only so a broken Serve fails rather than hangs.
		deadline := time.Now().Add(30 * time.Second)
		for !client.Exited() && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if !client.Exited() {
			t.Fatal("the plugin did not exit on SIGTERM")
		}
		closed(t, file)
	})
}
