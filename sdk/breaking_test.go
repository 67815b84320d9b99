package sdk

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBufBreakingRefusesABreakingChange runs what `make lint` runs, buf
// breaking against the released image of protocol v1, on a copy of the
// proto: as it is (passes), with a field added (passes) and with a field
// renumbered (fails, naming the field), so a breaking change fails lint.
func TestBufBreakingRefusesABreakingChange(t *testing.T) {
	buf, err := filepath.Abs("../build/bin/buf")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(buf); err != nil {
		t.Skipf("buf is not built (make tools): %v", err)
	}
	released, err := filepath.Abs("proto/v1.released.binpb")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("proto/v1/plugin.proto")
	if err != nil {
		t.Fatal(err)
	}
	yaml, err := os.ReadFile("proto/buf.yaml")
	if err != nil {
		t.Fatal(err)
	}
	check := func(proto string) (string, error) {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "v1"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "buf.yaml"), yaml, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "v1", "plugin.proto"), []byte(proto), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(buf, "breaking", dir, "--against", released).CombinedOutput()
		return string(out), err
	}
	if out, err := check(string(src)); err != nil {
		t.Fatalf("the proto as it is breaks the released v1: %v\n%s", err, out)
	}
	// The first such field is FieldError.message, field 2 in the released v1.
	const field = "  string message = 2;\n"
	if !strings.Contains(string(src), field) {
		t.Fatalf("plugin.proto has no %q to change", field)
	}
	added := strings.Replace(string(src), field, field+"  string detail = 99;\n", 1)
	if out, err := check(added); err != nil {
		t.Fatalf("adding a field was taken as a break: %v\n%s", err, out)
	}
	renumbered := strings.Replace(string(src), field, "  string message = 3;\n", 1)
	out, err := check(renumbered)
	if err == nil {
		t.Fatalf("renumbering Error.message passed buf breaking:\n%s", out)
	}
	if !strings.Contains(out, "message") || !strings.Contains(out, "plugin.proto") {
		t.Fatalf("buf breaking failed without naming the field:\n%s", out)
	}
	t.Logf("buf breaking on a renumbered field:\n%s", out)
}
