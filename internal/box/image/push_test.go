package image

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/registry"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

func TestCheckRepo(t *testing.T) {
	for repo, ok := range map[string]bool{
		"registry.example.com/team/paddock-box": true,
		"127.0.0.1:5000/paddock/box":            true,
		"localhost/box":                         true,
		"team/box":                              true,
		"box":                                   true,
		"team/box:v1":                           false,
		"team/box@sha256:" + strings.Repeat("a", 64): false,
		"Team/Box":   false,
		"":           false,
		"-x/box":     false,
		"team//box":  false,
		"team/box/":  false,
		"team/box -": false,
	} {
		if err := CheckRepo(repo); (err == nil) != ok {
			t.Errorf("%q: %v", repo, err)
		}
	}
}

func TestRegistryHost(t *testing.T) {
	for repo, want := range map[string]string{
		"registry.example.com/team/box": "registry.example.com",
		"127.0.0.1:5000/box":            "127.0.0.1:5000",
		"localhost/box":                 "localhost",
		"team/box":                      "https://index.docker.io/v1/",
		"box":                           "https://index.docker.io/v1/",
	} {
		if got := registryHost(repo); got != want {
			t.Errorf("%s: %q, want %q", repo, got, want)
		}
	}
}

// TestRegistryAuth reads docker login's stored logins as the daemon wants
// them, refuses what it cannot read with what to do, and never echoes
// the file.
func TestRegistryAuth(t *testing.T) {
	write := func(t *testing.T, cfg string) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	basic := base64.StdEncoding.EncodeToString([]byte("alice:s3cret:with:colons"))
	decode := func(t *testing.T, v string) registry.AuthConfig {
		b, err := base64.URLEncoding.DecodeString(v)
		if err != nil {
			t.Fatal(err)
		}
		var ac registry.AuthConfig
		if err := json.Unmarshal(b, &ac); err != nil {
			t.Fatal(err)
		}
		return ac
	}

	if v, err := RegistryAuth(t.TempDir(), "r.example/box"); err != nil || !v.IsZero() {
		t.Fatalf("no config: %v %v", v, err)
	}
	dir := write(t, `{"auths":{"r.example":{"auth":"`+basic+`"},"https://index.docker.io/v1/":{"identitytoken":"tok"}}}`)
	v, err := RegistryAuth(dir, "r.example/team/box")
	if err != nil {
		t.Fatal(err)
	}
	if ac := decode(t, v.Reveal()); ac.Username != "alice" || ac.Password != "s3cret:with:colons" || ac.ServerAddress != "r.example" {
		t.Fatalf("basic login: %+v", ac)
	}
	if got := v.String(); strings.Contains(got, "s3cret") {
		t.Fatalf("the login prints as %q", got)
	}
	v, err = RegistryAuth(dir, "team/box")
	if err != nil || decode(t, v.Reveal()).IdentityToken != "tok" {
		t.Fatalf("Docker Hub token: %v", err)
	}
	if v, err := RegistryAuth(dir, "other.example/box"); err != nil || !v.IsZero() {
		t.Fatalf("no login for that registry: %v %v", v, err)
	}
	for name, cfg := range map[string]string{
		"a store":  `{"auths":{"r.example":{}},"credsStore":"pass"}`,
		"a helper": `{"credHelpers":{"r.example":"ecr-login"}}`,
	} {
		if _, err := RegistryAuth(write(t, cfg), "r.example/box"); !errdefs.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "docker push") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := RegistryAuth(write(t, `{"auths":{"r.example":{"auth":"bm8tY29sb24="}}}`), "r.example/box"); !errdefs.Is(err, errdefs.ErrInvalid) {
		t.Errorf("damaged login: %v", err)
	}
	_, err = RegistryAuth(write(t, `{"auths": {"r.example": {"auth": "`+basic+`"`), "r.example/box")
	if !errdefs.Is(err, errdefs.ErrInvalid) || strings.Contains(err.Error(), basic) {
		t.Errorf("broken JSON: %v", err)
	}
}

// FuzzRegistryAuth: whatever the Docker CLI's config holds, RegistryAuth
// returns a login or an error, never panics, and an error never carries
// the file's bytes.
func FuzzRegistryAuth(f *testing.F) {
	f.Add(`{"auths":{"r.example":{"auth":"YWxpY2U6cHc="}}}`)
	f.Add(`{"auths":{"r.example":{}},"credsStore":"pass"}`)
	f.Add(`{"credHelpers":{"r.example":"x"}}`)
	f.Add(`{"auths":{"r.example":{"auth":"!!"}}}`)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, cfg string) {
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := RegistryAuth(dir, "r.example/box")
		if err != nil && len(cfg) > 8 && strings.Contains(err.Error(), cfg) {
			t.Fatalf("the error echoes the config: %v", err)
		}
	})
}
