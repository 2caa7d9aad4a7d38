package credential

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/secret"
)

func TestKindsWire(t *testing.T) {
	s := secret.New("tok")
	for _, tc := range []struct {
		k            Kind
		env, hdr, hv string
	}{
		{KindOAuth, "CLAUDE_CODE_OAUTH_TOKEN", "Authorization", "Bearer tok"},
		{KindAPIKey, "ANTHROPIC_API_KEY", "X-Api-Key", "tok"},
		{KindAuthToken, "ANTHROPIC_AUTH_TOKEN", "Authorization", "Bearer tok"},
	} {
		if tc.k.EnvVar() != tc.env || tc.k.Header() != tc.hdr || tc.k.HeaderValue(s) != tc.hv {
			t.Errorf("%s: %s %s %s", tc.k, tc.k.EnvVar(), tc.k.Header(), tc.k.HeaderValue(s))
		}
		got, ok := tc.k.FromHeaderValue(tc.hv)
		if !ok || !got.Equal(s) {
			t.Errorf("%s: FromHeaderValue failed", tc.k)
		}
	}
	for _, bad := range []string{"", "Bearer", "Bearer ", "Basic tok", "Bearer a b", "Bearertok"} {
		if _, ok := KindOAuth.FromHeaderValue(bad); ok {
			t.Errorf("accepted %q", bad)
		}
	}
	if v, ok := KindOAuth.FromHeaderValue("bEaReR tok"); !ok || v.Reveal() != "tok" {
		t.Error("scheme should be case-insensitive")
	}
}

func TestDetectKind(t *testing.T) {
	if k, _ := DetectKind(secret.New("sk-ant-oat01-xxxx")); k != KindOAuth {
		t.Error(k)
	}
	if k, _ := DetectKind(secret.New("sk-ant-api03-xxxx")); k != KindAPIKey {
		t.Error(k)
	}
	if _, ok := DetectKind(secret.New("something")); ok {
		t.Error("guessed a kind")
	}
}

func TestFileRoundTripAndPermissions(t *testing.T) {
	f := File{Path: filepath.Join(t.TempDir(), "credential.json")}
	if _, err := f.Load(); !errors.Is(err, ErrMissing) {
		t.Fatalf("missing: %v", err)
	}
	if err := f.Save(KindAPIKey, secret.New("key with space")); err == nil {
		t.Fatal("accepted white space")
	}
	if err := f.Save(KindAPIKey, secret.New("fake-key-1")); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(f.Path)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	c, err := f.Load()
	if err != nil || c.Kind != KindAPIKey || c.Secret.Reveal() != "fake-key-1" || !strings.HasPrefix(c.Source, "file:") {
		t.Fatalf("%+v %v", c.Status(), err)
	}
	os.Chmod(f.Path, 0o644)
	if _, err := f.Load(); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("open file accepted: %v", err)
	}
	os.Chmod(f.Path, 0o600)
	os.WriteFile(f.Path, []byte(`{"version":1,"kind":"api_key","secret":"fake-key-1"`), 0o600)
	_, err = f.Load()
	if err == nil || strings.Contains(err.Error(), "fake-key-1") {
		t.Fatalf("damaged file: %v", err)
	}
}

func TestChainOrderAndReload(t *testing.T) {
	f := File{Path: filepath.Join(t.TempDir(), "credential.json")}
	ch := &Chain{File: f, Env: []string{"ANTHROPIC_API_KEY=env-key", "CLAUDE_CODE_OAUTH_TOKEN= "}}
	c, err := ch.Current()
	if err != nil || c.Source != "env:ANTHROPIC_API_KEY" || c.Kind != KindAPIKey {
		t.Fatalf("env: %+v %v", c.Status(), err)
	}
	if err := f.Save(KindOAuth, secret.New("file-token")); err != nil {
		t.Fatal(err)
	}
	c, err = ch.Current()
	if err != nil || c.Kind != KindOAuth || c.Secret.Reveal() != "file-token" {
		t.Fatalf("file did not win: %+v %v", c.Status(), err)
	}
	f.Remove()
	time.Sleep(time.Millisecond)
	c, _ = ch.Current()
	if c.Source != "env:ANTHROPIC_API_KEY" {
		t.Fatalf("removal not seen: %+v", c.Status())
	}
	empty := &Chain{File: File{Path: filepath.Join(t.TempDir(), "x")}}
	if _, err := empty.Current(); !errors.Is(err, ErrMissing) {
		t.Fatal(err)
	}
}

func TestStatusHasNoSecret(t *testing.T) {
	c := Credential{Kind: KindOAuth, Secret: secret.New("sk-ant-oat01-very-secret"), Source: "env:X"}
	st := c.Status()
	if strings.Contains(st.Fingerprint+st.Source, "very-secret") || st.Length != 24 || len(st.Fingerprint) != 12 {
		t.Fatalf("%+v", st)
	}
}
