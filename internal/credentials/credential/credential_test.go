package credential

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/credentials/secret"
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

// TestChainMissingIsNotCached: a Runner with no credential sees one the
// moment paddock credential set stores it, not a recheck period later (a
// paddock run right after the set was refused with "no credential: store
// one with paddock credential set").
func TestChainMissingIsNotCached(t *testing.T) {
	f := File{Path: filepath.Join(t.TempDir(), "credential.json")}
	ch := &Chain{File: f, RecheckEvery: time.Hour}
	if _, err := ch.Current(); !errors.Is(err, ErrMissing) {
		t.Fatalf("before: %v", err)
	}
	if err := f.Save(KindOAuth, secret.New("file-token")); err != nil {
		t.Fatal(err)
	}
	if c, err := ch.Current(); err != nil || c.Secret.Reveal() != "file-token" {
		t.Fatalf("after paddock credential set: %+v %v", c.Status(), err)
	}
	// A credential found is still kept for the period.
	if err := f.Save(KindOAuth, secret.New("second-token")); err != nil {
		t.Fatal(err)
	}
	if c, _ := ch.Current(); c.Secret.Reveal() != "file-token" {
		t.Fatalf("a found credential was not kept for RecheckEvery: %+v", c.Status())
	}
}

func TestStatusHasNoSecret(t *testing.T) {
	c := Credential{Kind: KindOAuth, Secret: secret.New("sk-ant-oat01-very-secret"), Source: "env:X"}
	st := c.Status()
	if strings.Contains(st.Fingerprint+st.Source, "very-secret") || st.Length != 24 || len(st.Fingerprint) != 12 {
		t.Fatalf("%+v", st)
	}
}

func TestLoginFileAndPlan(t *testing.T) {
	dir := t.TempDir()
	login := filepath.Join(dir, ".credentials.json")
	exp := time.Now().Add(time.Hour).UnixMilli()
	os.WriteFile(login, []byte(fmt.Sprintf(`{"claudeAiOauth":{"accessToken":"sk-fake-login-token","refreshToken":"sk-fake-refresh","expiresAt":%d,"scopes":["user:inference","user:profile"],"subscriptionType":"max"}}`, exp)), 0o600)
	before, _ := os.ReadFile(login)
	ch := &Chain{File: File{Path: filepath.Join(dir, "none.json")}, Login: LoginFile{Path: login}, Plan: Plan{RateLimitTier: "tier-from-config"}}
	c, err := ch.Current()
	if err != nil || c.Kind != KindOAuth || c.Secret.Reveal() != "sk-fake-login-token" || !strings.HasPrefix(c.Source, "claude-login:") {
		t.Fatalf("%+v %v", c.Status(), err)
	}
	if c.Plan.SubscriptionType != "max" || c.Plan.Scopes != "user:inference user:profile" || c.Plan.RateLimitTier != "tier-from-config" {
		t.Fatalf("plan %+v", c.Plan)
	}
	env := strings.Join(c.Plan.Env(), " ")
	if !strings.Contains(env, "CLAUDE_CODE_SUBSCRIPTION_TYPE=max") || !strings.Contains(env, "CLAUDE_CODE_OAUTH_SCOPES=user:inference user:profile") {
		t.Fatal(env)
	}
	st := c.Status()
	if st.Expires == nil || st.Plan.SubscriptionType != "max" || strings.Contains(fmt.Sprint(st), "sk-fake") {
		t.Fatalf("status %+v", st)
	}
	if err := c.Usable(time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := c.Usable(time.Now().Add(2 * time.Hour)); !errors.Is(err, ErrExpired) || !strings.Contains(err.Error(), "never refreshes") {
		t.Fatalf("expired: %v", err)
	}
	// Read, never written: the refresh token is left alone.
	after, _ := os.ReadFile(login)
	if string(after) != string(before) {
		t.Fatal("the login file was changed")
	}
	// Env wins over the login file; the stored file wins over both.
	ch2 := &Chain{File: File{Path: filepath.Join(dir, "none.json")}, Env: []string{"ANTHROPIC_API_KEY=sk-fake-env"}, Login: LoginFile{Path: login}}
	if c, _ := ch2.Current(); c.Source != "env:ANTHROPIC_API_KEY" {
		t.Fatalf("order: %s", c.Source)
	}
	os.WriteFile(login, []byte(`{"other":1}`), 0o600)
	ch3 := &Chain{File: File{Path: filepath.Join(dir, "none.json")}, Login: LoginFile{Path: login}}
	if _, err := ch3.Current(); err == nil || !strings.Contains(err.Error(), "no OAuth token") {
		t.Fatalf("bad login file: %v", err)
	}
}

func TestKeyring(t *testing.T) {
	if ok, why := KeyringAvailable(); !ok {
		t.Skipf("no OS keyring on this host (%s); the stored credential is the 0600 file", why)
	}
	k := Keyring{Account: t.TempDir()}
	defer k.Remove()
	if err := k.Save(KindOAuth, secret.New("sk-fake-keyring-token")); err != nil {
		t.Fatal(err)
	}
	c, err := k.Load()
	if err != nil || c.Secret.Reveal() != "sk-fake-keyring-token" || !strings.HasPrefix(c.Source, "keyring:") {
		t.Fatalf("%+v %v", c.Status(), err)
	}
	ch := &Chain{File: File{Path: filepath.Join(t.TempDir(), "none")}, Keyring: k, Env: []string{"ANTHROPIC_API_KEY=sk-fake-env"}}
	if c, _ := ch.Current(); !strings.HasPrefix(c.Source, "keyring:") {
		t.Fatalf("the keyring does not come before the environment: %s", c.Source)
	}
}
