package sdk

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

func TestProtocolVersionMatchesProto(t *testing.T) {
	src, err := os.ReadFile("proto/v1/plugin.proto")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^// protocol_version = (\d+)$`).FindSubmatch(src)
	if m == nil {
		t.Fatal("proto/v1/plugin.proto has no \"// protocol_version = N\" line")
	}
	n, _ := strconv.Atoi(string(m[1]))
	if n != ProtocolVersion {
		t.Fatalf("plugin.proto says protocol_version = %d, sdk.ProtocolVersion is %d", n, ProtocolVersion)
	}
	for v := 1; v <= ProtocolVersion; v++ {
		if _, ok := pluginSets(nil, nil)[v]; !ok {
			t.Fatalf("pluginSets serves no set for protocol version %d: a plugin offers every version from 1 up", v)
		}
	}
	if MinProtocolVersion != 1 {
		t.Fatalf("MinProtocolVersion = %d: the host serves every version from 1 up", MinProtocolVersion)
	}
}

// TestGeneratedCodeIsFresh regenerates the protocol's Go code with the
// pinned generators (built by `make tools` into build/bin) and compares.
func TestGeneratedCodeIsFresh(t *testing.T) {
	bin, err := filepath.Abs("../build/bin")
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"buf", "protoc-gen-go", "protoc-gen-go-grpc"} {
		if _, err := os.Stat(filepath.Join(bin, tool)); err != nil {
			t.Fatalf("%s is not built: run `make tools` (make test does): %v", tool, err)
		}
	}
	// buf.gen.yaml writes to ../internal/pluginv1 from sdk/proto: from
	// tmp/proto, that is tmp/internal/pluginv1.
	tmp := t.TempDir()
	cmd := exec.Command(filepath.Join(bin, "buf"), "generate", "-o", filepath.Join(tmp, "proto"))
	cmd.Dir = "proto"
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("buf generate: %v\n%s", err, b)
	}
	for _, f := range []string{"internal/pluginv1/plugin.pb.go", "internal/pluginv1/plugin_grpc.pb.go"} {
		want, err := os.ReadFile(filepath.Join(tmp, f))
		if err != nil {
			t.Fatal(err)
		}
		have, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(want, have) {
			t.Errorf("sdk/%s is stale: run `make proto`", f)
		}
	}
}
