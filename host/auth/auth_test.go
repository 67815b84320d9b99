package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/config"
)

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestCheckFindsTheTokensOwnerAndRefusesOthers(t *testing.T) {
	toks := New([]config.Token{
		{Name: "ada", SHA256: hash("a-secret"), Role: Admin},
		{Name: "vic", SHA256: hash("v-secret"), Role: Viewer},
	})
	if !toks.Required() {
		t.Fatal("tokens are configured but not required")
	}
	if id, ok := toks.Check("v-secret"); !ok || id.Name != "vic" || id.Role != Viewer {
		t.Errorf("Check(v-secret) = %+v, %v", id, ok)
	}
	if id, ok := toks.Check("a-secret"); !ok || id.Name != "ada" || !id.CanCall() {
		t.Errorf("Check(a-secret) = %+v, %v", id, ok)
	}
	for _, bad := range []string{"", "v-secre", "v-secret ", hash("v-secret")} {
		if id, ok := toks.Check(bad); ok {
			t.Errorf("Check(%q) let in %+v", bad, id)
		}
	}
	if New(nil).Required() {
		t.Error("no tokens, yet a token is required")
	}
}

func TestRoles(t *testing.T) {
	viewer := Identity{Name: "vic", Role: Viewer}
	editor := Identity{Name: "ed", Role: Editor}
	admin := Identity{Name: "ada", Role: Admin}
	if viewer.CanCall() || !editor.CanCall() || !admin.CanCall() {
		t.Error("only editors and admins may call")
	}
	if !viewer.CanSee("vic") || viewer.CanSee("ed") || !editor.CanSee("ed") || editor.CanSee("vic") || !admin.CanSee("anyone") {
		t.Error("callers see their own runs, admins every run")
	}
	if (Identity{}).CanSee("") {
		t.Error("nobody sees a run of nobody")
	}
}

func TestBearer(t *testing.T) {
	for h, want := range map[string]string{"Bearer abc": "abc", "bearer  abc ": "abc", "Basic abc": "", "Bearer": ""} {
		r, _ := http.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", h)
		if got, present := Bearer(r); got != want || !present {
			t.Errorf("Bearer(%q) = %q, %v; want %q", h, got, present, want)
		}
	}
	r, _ := http.NewRequest("GET", "/", nil)
	if _, present := Bearer(r); present {
		t.Error("no header, yet a token is present")
	}
}

func TestRecheckAfterTheTokensChange(t *testing.T) {
	before := New([]config.Token{
		{Name: "ed", SHA256: hash("e"), Role: Editor},
		{Name: "vic", SHA256: hash("v"), Role: Viewer},
		{Name: "ren", SHA256: hash("r"), Role: Editor},
		{Name: "gone", SHA256: hash("g"), Role: Admin},
	})
	after := New([]config.Token{
		{Name: "ed", SHA256: hash("e"), Role: Viewer},   // lowered
		{Name: "vic", SHA256: hash("v"), Role: Admin},   // raised
		{Name: "ren2", SHA256: hash("r"), Role: Editor}, // renamed
	})
	signIn := func(tok string) Identity {
		id, ok := before.Check(tok)
		if !ok {
			t.Fatalf("%s does not sign in", tok)
		}
		return id
	}
	for _, c := range []struct {
		token, code, mentions, role string
	}{
		{"e", "token_downgraded", `"ed" was lowered from editor to viewer`, ""},
		{"v", "", "", Admin},
		{"r", "token_revoked", `"ren" is named "ren2"`, ""},
		{"g", "token_revoked", `"gone" was removed`, ""},
	} {
		id, change := after.Recheck(signIn(c.token))
		switch {
		case c.code == "" && (change != nil || id.Role != c.role || id.Name == ""):
			t.Errorf("%s: %+v, %+v; want it kept as %s", c.token, id, change, c.role)
		case c.code != "" && (change == nil || change.Code != c.code || !strings.Contains(change.Message, c.mentions)):
			t.Errorf("%s: %+v; want %s mentioning %q", c.token, change, c.code, c.mentions)
		}
	}
	if _, change := New(nil).Recheck(signIn("v")); change == nil || change.Code != "token_revoked" {
		t.Errorf("every token removed: %+v", change)
	}
	if _, change := after.Recheck(Local()); change == nil || change.Code != "token_revoked" {
		t.Errorf("tokens turned on, a local caller: %+v", change)
	}
	if id, change := New(nil).Recheck(Local()); change != nil || id != Local() {
		t.Errorf("still no tokens, a local caller: %+v, %+v", id, change)
	}
}
