package hostside_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/hostside"
)

// build builds a plugin into the test's folder.
func build(t *testing.T, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// start starts a plugin binary as the host does, asking for sets, and
// returns the kind's client and the version negotiated.
func start(t *testing.T, bin string, sets map[int]plugin.PluginSet) (*hostside.KindClient, int, error) {
	t.Helper()
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  sdk.Handshake,
		VersionedPlugins: sets,
		Cmd:              exec.Command(bin),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           hclog.NewNullLogger(),
	})
	t.Cleanup(client.Kill)
	rpc, err := client.Client()
	if err != nil {
		return nil, 0, err
	}
	raw, err := rpc.Dispense(sdk.PluginName)
	if err != nil {
		t.Fatal(err)
	}
	return raw.(*hostside.KindClient), client.NegotiatedVersion(), nil
}

// onlyVersions is the host's plugin sets cut down to some versions, as a
// host of another release would ask.
func onlyVersions(versions ...int) map[int]plugin.PluginSet {
	all := hostside.PluginSets(nil)
	out := map[int]plugin.PluginSet{}
	for _, v := range versions {
		out[v] = all[v]
	}
	return out
}

// TestAHostOfEveryVersionServesAPluginOfProtocol1: the v1 build kept in
// sdk/testdata/v1-kind (handshake version 1 only) is served by this host,
// which also speaks 2: version 1 is negotiated, its tool runs and its
// output streams. A host that dropped version 1 from its plugin sets
// can't start it, and says the versions.
func TestAHostOfEveryVersionServesAPluginOfProtocol1(t *testing.T) {
	bin := build(t, "../testdata/v1-kind")
	kc, v, err := start(t, bin, hostside.PluginSets(nil))
	if err != nil {
		t.Fatalf("a host of versions 1 to %d could not start the v1 plugin: %v", sdk.ProtocolVersion, err)
	}
	if v != 1 {
		t.Fatalf("negotiated version %d with a v1 plugin, want 1", v)
	}
	ctx := context.Background()
	info, versions, err := kc.Describe(ctx)
	if err != nil || info.Kind != "v1" || len(versions) != 1 || versions[0] != 1 {
		t.Fatalf("describe: %+v %v %v", info, versions, err)
	}
	// A plugin built before kinds said whether their runs bring outside
	// text says nothing, which the host reads as unsaid (and taints by).
	if info.OutsideText != sdk.OutsideTextUnsaid {
		t.Errorf("the v1 plugin's outside text: %v, want unsaid", info.OutsideText)
	}
	if err := kc.Configure(ctx, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	tool := sdk.Tool{Name: "old", Run: json.RawMessage(`{"type":"v1"}`)}
	run, err := kc.Check(ctx, tool, nil)
	if err != nil {
		t.Fatal(err)
	}
	tool.Run = run
	var out strings.Builder
	var progress []sdk.Progress
	res, err := kc.Invoke(ctx, hostside.Invocation{Tool: tool, Args: json.RawMessage(`{"text":"hi"}`), RunID: "r1"}, func(e sdk.Event) {
		out.Write(e.Stdout)
		if e.Progress != nil {
			progress = append(progress, *e.Progress)
		}
	})
	if err != nil || string(res) != `{"echoed":"hi","protocol":1}` || out.String() != "echo: hi\n" {
		t.Fatalf("invoke: %s %q %v", res, out.String(), err)
	}
	if len(progress) != 1 || progress[0].Fraction != -1 || progress[0].Node != "" || progress[0].Message != `node "echo" done` {
		t.Fatalf("progress %+v", progress)
	}

	_, _, err = start(t, bin, onlyVersions(2))
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "incompatible api version") {
		t.Fatalf("a host of version 2 only started the v1 plugin: %v", err)
	}
}

// TestAPluginOfTheSDKNegotiatesTheHighestVersion: a plugin built with this
// SDK offers every version it knows: a host of them all gets the newest,
// a host of version 1 only (an older release) gets 1.
func TestAPluginOfTheSDKNegotiatesTheHighestVersion(t *testing.T) {
	bin := build(t, "../../examples/echo-kind")
	for _, c := range []struct {
		sets map[int]plugin.PluginSet
		want int
	}{{hostside.PluginSets(nil), sdk.ProtocolVersion}, {onlyVersions(1), 1}} {
		kc, v, err := start(t, bin, c.sets)
		if err != nil {
			t.Fatal(err)
		}
		if v != c.want {
			t.Fatalf("negotiated %d, want %d", v, c.want)
		}
		if _, versions, err := kc.Describe(context.Background()); err != nil || len(versions) != sdk.ProtocolVersion {
			t.Fatalf("describe says versions %v, %v", versions, err)
		}
	}
}
