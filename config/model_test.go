package config

import (
	"strings"
	"testing"
)

func TestModelDefaults(t *testing.T) {
	for _, src := range []string{"# nothing\n", "[model]\n"} {
		c, err := Parse("/etc/toolhost/toolhost.toml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		want := ModelConfig{BaseURL: "http://127.0.0.1:11434/v1", TimeoutSeconds: 120, MaxTokens: 1024}
		if c.Model != want {
			t.Errorf("%q: [model] = %+v, want %+v", src, c.Model, want)
		}
		if c.Model.Configured() {
			t.Errorf("%q: a model is configured with no model set", src)
		}
	}
}

func TestModelEverySetting(t *testing.T) {
	src := `[model]
base_url = "https://api.example.com/v1/"
model = "gpt-4o-mini"
api_key_file = "secrets/model.key"
timeout_seconds = 30
max_tokens = 200
`
	c, err := Parse("/srv/th/conf/toolhost.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := ModelConfig{BaseURL: "https://api.example.com/v1", Model: "gpt-4o-mini",
		APIKeyFile: "/srv/th/conf/secrets/model.key", TimeoutSeconds: 30, MaxTokens: 200}
	if c.Model != want {
		t.Errorf("[model] = %+v, want %+v", c.Model, want)
	}
	if !c.Model.Configured() {
		t.Error("a model is set but not configured")
	}

	c, err = Parse("/srv/th/conf/toolhost.toml", []byte("[model]\nmodel = \"llama3.2\"\napi_key_env = \"MODEL_KEY\"\napi_key_file = \"\"\nbase_url = \"http://localhost:8000/v1\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Model.APIKeyEnv != "MODEL_KEY" || c.Model.APIKeyFile != "" || c.Model.BaseURL != "http://localhost:8000/v1" {
		t.Errorf("[model] = %+v", c.Model)
	}
}

func TestModelErrors(t *testing.T) {
	const key = "sk-proj-abcdef0123456789"
	tests := []struct {
		name string
		toml string
		want string
	}{
		{"api_key refused", "[model]\nmodel = \"m\"\napi_key = \"" + key + "\"\n",
			`toolhost.toml:3: model.api_key: the API key must not be written in the config: put it in an environment variable and name that in api_key_env, or in a file only the host's user can read and name that in api_key_file`},
		{"api_key in a dotted key", "model.api_key = \"" + key + "\"\n",
			`toolhost.toml:1: model.api_key: the API key must not be written in the config: put it in an environment variable and name that in api_key_env, or in a file only the host's user can read and name that in api_key_file`},
		{"key where its name goes", "[model]\n\napi_key_env = \"" + key + "\"\n",
			`toolhost.toml:3: model.api_key_env: must be the name of an environment variable that holds the key (letters, digits and underscores, e.g. "OPENAI_API_KEY"), not the key itself`},
		{"env and file", "[model]\napi_key_env = \"K\"\napi_key_file = \"/k\"\n",
			`toolhost.toml:3: model.api_key_file: api_key_env and api_key_file are both set: keep one, so it is clear which key is sent`},
		{"timeout low", "[model]\ntimeout_seconds = 0\n", `toolhost.toml:2: model.timeout_seconds: must be from 1 to 3600, not 0`},
		{"timeout high", "[model]\ntimeout_seconds = 3601\n", `toolhost.toml:2: model.timeout_seconds: must be from 1 to 3600, not 3601`},
		{"timeout type", "[model]\ntimeout_seconds = \"60\"\n", `toolhost.toml:2: model.timeout_seconds: must be a whole number, not a string`},
		{"max tokens", "[model]\nmax_tokens = 0\n", `toolhost.toml:2: model.max_tokens: must be from 1 to 1048576, not 0`},
		{"max tokens decimal", "[model]\nmax_tokens = 100.0\n", `toolhost.toml:2: model.max_tokens: must be a whole number, not a decimal number (write 100, without the ".0")`},
		{"base url empty", "[model]\nbase_url = \"\"\n", `toolhost.toml:2: model.base_url: must not be empty: leave base_url out to use the default, "http://127.0.0.1:11434/v1"`},
		{"base url no scheme", "[model]\nbase_url = \"localhost:11434/v1\"\n",
			`toolhost.toml:2: model.base_url: must be an http or https URL, like "http://127.0.0.1:11434/v1" or "https://api.openai.com/v1", not "localhost:11434/v1"`},
		{"base url ftp", "[model]\nbase_url = \"ftp://example.com/v1\"\n",
			`toolhost.toml:2: model.base_url: must be an http or https URL, like "http://127.0.0.1:11434/v1" or "https://api.openai.com/v1", not "ftp://example.com/v1"`},
		{"base url password", "[model]\nbase_url = \"https://me:hunter2@api.example.com/v1\"\n",
			`toolhost.toml:2: model.base_url: must not hold a user name or password: name the API key in api_key_env or api_key_file instead`},
		{"base url query", "[model]\nbase_url = \"https://api.example.com/v1?x=1\"\n",
			`toolhost.toml:2: model.base_url: must be the URL the API starts at, without a query or fragment, like "http://127.0.0.1:11434/v1" or "https://api.openai.com/v1", not "https://api.example.com/v1?x=1"`},
		{"key over plain http", "[model]\nbase_url = \"http://10.0.0.5:8000/v1\"\napi_key_env = \"K\"\n",
			`toolhost.toml:2: model.base_url: an API key is configured, and http://10.0.0.5:8000/v1 would send it unencrypted to 10.0.0.5: use an https URL (http is only for a model on this machine, e.g. http://127.0.0.1:11434/v1)`},
		{"model spaces", "[model]\nmodel = \" llama3.2\"\n", `toolhost.toml:2: model.model: " llama3.2" has spaces around the name: write the model's name alone, e.g. "llama3.2"`},
		{"model type", "[model]\nmodel = 3\n", `toolhost.toml:2: model.model: must be a string, not a whole number`},
		{"unknown key", "[model]\nmodel = \"m\"\ntimeout = 3\n", `toolhost.toml:3: model: unknown key "timeout" (did you mean "timeout_seconds"?)`},
		{"misspelt key is not led to api_key", "[model]\napikey = \"x\"\n", `toolhost.toml:2: model: unknown key "apikey"; the keys allowed here are "base_url", "model", "api_key_env", "api_key_file", "timeout_seconds", "max_tokens"`},
		{"not a table", "model = \"llama3.2\"\n", `toolhost.toml:1: model: must be a table, not a string`},
		{"misspelt table", "[modle]\nmodel = \"m\"\n", `toolhost.toml:1: modle: [modle] names no kind of this host: no kind's plugin was found in /usr/lib/toolhost/plugins (did you mean [model]?)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("toolhost.toml", []byte(tt.toml))
			if tt.name == "misspelt table" {
				// [modle] is a kind's table as far as parsing goes; the
				// host reports it when no kind takes it.
				if err != nil {
					t.Fatal(err)
				}
				err = errorsOrNil(c.StrayKindTables(nil, nil))
			}
			assertErrors(t, err, tt.want)
			if err != nil && strings.Contains(err.Error(), key) {
				t.Errorf("the error quotes the key: %v", err)
			}
		})
	}
}

// TestExampleModel: the example config's [model] is the defaults but for
// the model, Ollama's llama3.2, so that with no model server running the
// example prompt tool says the model can't be reached.
func TestExampleModel(t *testing.T) {
	c, err := Load(exampleTree(t))
	if err != nil {
		t.Fatal(err)
	}
	want := Default().Model
	want.Model = "llama3.2"
	if c.Model != want {
		t.Errorf("the example's [model] = %+v, want %+v", c.Model, want)
	}
}
