package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
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
	if id, ok := toks.Check("v-secret"); !ok || id != (Identity{Name: "vic", Role: Viewer}) {
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
