package integration

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/client"
)

// TestToolsInEachFormat: the real host gives the example tools (those of
// kinds that need no sandbox or model) in each provider's format, every
// one with a strict form, and refuses a format it does not know.
func TestToolsInEachFormat(t *testing.T) {
	files := map[string]string{}
	for _, name := range []string{"get_json.toml", "summarise.toml"} {
		b, err := os.ReadFile(filepath.Join("../examples/tools", name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = string(b)
	}
	h := startHost(t, hostSpec{Tools: files})
	get := func(query string) (int, map[string]json.RawMessage) {
		t.Helper()
		resp, err := http.Get(h.URL("/api/v1/tools" + query))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]json.RawMessage
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, body
	}

	code, body := get("?format=openai&strict=true")
	var strict []client.OpenAITool
	if err := json.Unmarshal(body["tools"], &strict); code != 200 || err != nil || len(strict) != 2 || body["not_strict"] != nil {
		t.Fatalf("openai strict = %d %s (%v)\nhost log:\n%s", code, body, err, h.Stderr())
	}
	for _, tool := range strict {
		params := tool.Function.Parameters
		props, _ := params["properties"].(map[string]any)
		required, _ := params["required"].([]any)
		if tool.Function.Strict == nil || !*tool.Function.Strict || len(required) != len(props) || params["additionalProperties"] != false {
			t.Errorf("%s is not in strict form: %+v", tool.Function.Name, tool.Function)
		}
	}
	if strings.Contains(string(body["tools"]), `"effect"`) {
		t.Errorf("the openai format carries effect: %s", body["tools"])
	}

	code, body = get("?format=anthropic")
	var anthropic []client.AnthropicTool
	if err := json.Unmarshal(body["tools"], &anthropic); code != 200 || err != nil || len(anthropic) != 2 || anthropic[0].Name != "get_json" || anthropic[0].InputSchema["type"] != "object" {
		t.Errorf("anthropic = %d %s", code, body)
	}

	code, body = get("")
	var def []client.Tool
	if err := json.Unmarshal(body["tools"], &def); code != 200 || err != nil || len(def) != 2 || def[0].Effect != "read" || def[1].Kind != "prompt" {
		t.Errorf("the default = %d %s", code, body)
	}
	// get_json's id is an integer: its range is published.
	id, _ := def[0].Function.Parameters["properties"].(map[string]any)["id"].(map[string]any)
	if id["maximum"] != float64(9007199254740991) {
		t.Errorf("get_json's id: %v", id)
	}

	if code, body = get("?format=xml"); code != 400 || !strings.Contains(string(body["error"]), `format must be one of toolhost, openai, anthropic, mcp, not \"xml\"`) {
		t.Errorf("a bad format = %d %s", code, body)
	}
}
