package config

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
)

// ModelConfig is [model]: the one OpenAI-compatible chat endpoint the host
// asks for every model call (a prompt tool, a graph's ask_model node).
//
// The API key is never in the config itself: APIKeyEnv names an environment
// variable holding it, or APIKeyFile a file holding it. Neither is read
// here; the model client reads the key when it is made, so a key is not
// kept in a Config that is logged or compared on reload.
type ModelConfig struct {
	// BaseURL is where the endpoint's API starts, without a trailing
	// slash: chat completions are at BaseURL + "/chat/completions".
	// Default "http://127.0.0.1:11434/v1" (Ollama on this machine).
	BaseURL string
	// Model is the model asked, as the endpoint names it ("llama3.2",
	// "gpt-4o-mini"). Default "": no model is configured, and a model call
	// says so and how to configure one.
	Model string
	// APIKeyEnv names the environment variable holding the API key; "" for
	// none.
	APIKeyEnv string
	// APIKeyFile is a file holding the API key (surrounding whitespace is
	// trimmed). Absolute; "" for none. At most one of APIKeyEnv and
	// APIKeyFile is set; with neither, calls carry no key.
	APIKeyFile string
	// TimeoutSeconds bounds one model call as a whole, from the request to
	// the last word of the answer. Default 120, 1..3600.
	TimeoutSeconds int
	// MaxTokens is the longest answer asked for, in tokens, when the call
	// does not say. Default 1024, 1..1048576.
	MaxTokens int
}

// Configured says whether a model is configured: Model is set.
func (m ModelConfig) Configured() bool { return m.Model != "" }

// DefaultModelBaseURL is [model] base_url's default: Ollama on this
// machine.
const DefaultModelBaseURL = "http://127.0.0.1:11434/v1"

func defaultModel() ModelConfig {
	return ModelConfig{BaseURL: DefaultModelBaseURL, TimeoutSeconds: 120, MaxTokens: 1024}
}

// envNameRE is what an environment variable's name may be.
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// decodeModel reads [model] into m. dir is the config file's folder.
func (d *decoder) decodeModel(v any, m *ModelConfig, dir string) {
	t := d.table("model", v)
	var base string
	if t.str("base_url", &base) {
		if b, msg := checkBaseURL(base); msg != "" {
			d.addf(t.at("base_url"), "%s", msg)
		} else {
			m.BaseURL = b
		}
	}
	if t.str("model", &m.Model) && m.Model != strings.TrimSpace(m.Model) {
		d.addf(t.at("model"), "%q has spaces around the name: write the model's name alone, e.g. \"llama3.2\"", m.Model)
	}
	d.secret(t, dir, secretKeys{key: "api_key", noun: "key", the: "the API key", exampleEnv: "OPENAI_API_KEY"},
		&m.APIKeyEnv, &m.APIKeyFile)
	t.int("timeout_seconds", &m.TimeoutSeconds, 1, 3600)
	t.int("max_tokens", &m.MaxTokens, 1, 1<<20)
	if (m.APIKeyEnv != "" || m.APIKeyFile != "") && !d.hasErrorAt("model.base_url") {
		if msg := checkKeyTransport(m.BaseURL); msg != "" {
			d.addf(t.at("base_url"), "%s", msg)
		}
	}
	t.done()
}

// checkBaseURL checks a base_url and returns it without its trailing
// slash, or a message saying what is wrong.
func checkBaseURL(s string) (string, string) {
	const like = `like "http://127.0.0.1:11434/v1" or "https://api.openai.com/v1"`
	if s == "" {
		return "", fmt.Sprintf("must not be empty: leave base_url out to use the default, %q", DefaultModelBaseURL)
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return "", fmt.Sprintf("must be an http or https URL, %s, not %q", like, s)
	}
	if u.User != nil {
		// Not quoted: the part before @ may be a password.
		return "", "must not hold a user name or password: name the API key in api_key_env or api_key_file instead"
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", fmt.Sprintf("must be the URL the API starts at, without a query or fragment, %s, not %q", like, s)
	}
	return strings.TrimRight(s, "/"), ""
}

// checkKeyTransport refuses to send an API key in clear text to another
// machine: over http, anyone on the way reads it.
func checkKeyTransport(base string) string {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" {
		return ""
	}
	host := u.Hostname()
	if host == "localhost" {
		return ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return ""
	}
	return fmt.Sprintf("an API key is configured, and %s would send it unencrypted to %s: use an https URL "+
		"(http is only for a model on this machine, e.g. http://127.0.0.1:11434/v1)", base, host)
}

// secretKeys names a secret's settings: <key>_env names an environment
// variable holding it, <key>_file a file holding it, and <key> itself is
// refused. noun and the are the secret in words ("key", "the API key").
type secretKeys struct{ key, noun, the, exampleEnv string }

// secret reads where a secret comes from into env and file (at most one of
// them), and refuses the secret written in the config itself.
func (d *decoder) secret(t *table, dir string, k secretKeys, env, file *string) {
	envKey, fileKey := k.key+"_env", k.key+"_file"
	// The value is never quoted back: it may be the secret itself, written
	// where its name was meant to go.
	if t.str(envKey, env) && *env != "" && !envNameRE.MatchString(*env) {
		d.addf(t.at(envKey), "must be the name of an environment variable that holds the %s "+
			"(letters, digits and underscores, e.g. %q), not the %s itself", k.noun, k.exampleEnv, k.noun)
		*env = ""
	}
	d.path(t, fileKey, dir, file, true)
	if *env != "" && *file != "" {
		d.addf(t.at(fileKey), "%s and %s are both set: keep one, so it is clear which %s is sent", envKey, fileKey, k.noun)
	}
	// The key itself is known, so that it is refused for what it is rather
	// than offered as a suggestion for a misspelt key.
	t.skip(k.key)
	if _, ok := t.m[k.key]; ok {
		d.addf(t.at(k.key), "%s must not be written in the config: put it in an environment variable "+
			"and name that in %s, or in a file only the host's user can read and name that in %s", k.the, envKey, fileKey)
	}
}
