package runner

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zalando/go-keyring"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/credentials/service"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/config"
	"github.com/paddockhq/paddock/internal/daemon/people"
	"github.com/paddockhq/paddock/internal/testkit/fakeapi"
)

// TestSecretsArePerPerson: a person's service credentials are theirs: another
// sees none of them and cannot grant them; a grant is checked against its
// secret's kind at create, and its session gets a placeholder, never the
// value; a secret removed is refused to the session that had it.
func TestSecretsArePerPerson(t *testing.T) {
	backends := testBackends(t)
	const owner = "sk-fake-owner-cred-0000000000"
	up := httptest.NewServer(fakeapi.New(owner))
	defer up.Close()
	cfg := config.Default()
	cfg.Proxy.Listen, cfg.Web.Listen, cfg.Anthropic.Upstream = "127.0.0.1:0", "127.0.0.1:0", up.URL
	cfg.Credential.FallbackToOwner = true
	cfg.Services.Sets = map[string][]string{"ship": {"gh:o/r:push"}}
	r, err := New(Options{StateDir: filepath.Join(t.TempDir(), "state"), Config: cfg, Env: []string{"CLAUDE_CODE_OAUTH_TOKEN=" + owner},
		Backends: map[string]sandbox.Backend{"local": backends["local"]}})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, r)
	ann := people.With(context.Background(), people.Person{UID: 4243001, Name: "ann"})
	ben := people.With(context.Background(), people.Person{UID: 4243002, Name: "ben"})
	const tok = "ghp_ann_only_0123456789abcdef"
	if _, err := r.SetSecret(ann, service.Secret{Name: "gh", Kind: service.GitHub, Value: secret.New(tok)}); err != nil {
		t.Fatal(err)
	}
	if l, err := r.ListSecrets(ben); err != nil || len(l) != 0 {
		t.Fatalf("ben sees %v %v", l, err)
	}
	l, err := r.ListSecrets(ann)
	if err != nil || len(l) != 1 || l[0].Name != "gh" || l[0].Fingerprint != service.Fingerprint(secret.New(tok)) {
		t.Fatalf("ann's list: %+v %v", l, err)
	}
	if b, _ := json.Marshal(l); strings.Contains(string(b), tok) {
		t.Fatal("the list holds the value")
	}
	if _, err := r.CreateSession(ben, api.CreateRequest{Name: "ben-1", Backend: "local", NoStart: true, Secrets: []string{"gh:o/r:push"}}); !errors.Is(err, errdefs.ErrNotFound) ||
		!strings.Contains(err.Error(), "paddock secret set gh") {
		t.Fatalf("ben granting ann's secret: %v", err)
	}
	for req, want := range map[string]string{"gh": "one repository", "gh:o/r:admin": "read or push", "gh:a/b/c": "OWNER/REPO"} {
		if _, err := r.CreateSession(ann, api.CreateRequest{Name: "ann-bad", Backend: "local", NoStart: true, Secrets: []string{req}}); !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("--secret %s: %v", req, err)
		}
	}
	if _, err := r.CreateSession(ann, api.CreateRequest{Name: "ann-set", Backend: "local", NoStart: true, SecretSets: []string{"nope"}}); !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "services.sets: ship") {
		t.Errorf("an unknown set: %v", err)
	}
	set, err := r.CreateSession(ann, api.CreateRequest{Name: "ann-set", Backend: "local", NoStart: true, SecretSets: []string{"ship"}})
	if err != nil || len(set.Services) != 1 || set.Services[0].String() != "gh:o/r:push" {
		t.Fatalf("a set: %+v %v", set.Services, err)
	}
	r.RemoveSession(context.Background(), set.ID, false)
	if _, err := r.CreateSession(ann, api.CreateRequest{Name: "ann-pr", Backend: "local", NoStart: true, PushRefs: []string{"x"}}); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("--push-ref without a grant: %v", err)
	}
	s, err := r.CreateSession(ann, api.CreateRequest{Name: "ann-1", Backend: "local", NoStart: true, Secrets: []string{"gh:o/r:push"}, PushRefs: []string{"feat/*"}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.RemoveSession(context.Background(), s.ID, false)
	if len(s.Services) != 1 || !strings.HasPrefix(s.Services[0].Placeholder, service.PlaceholderPrefix+"gh-") || s.Services[0].Access != service.Push {
		t.Fatalf("the session's grants: %+v", s.Services)
	}
	if b, _ := json.Marshal(s); strings.Contains(string(b), tok) {
		t.Fatal("the session record holds the value")
	}
	if got := strings.Join(s.OwnBranches(), ","); got != "paddock/ann-1,feat/*" {
		t.Fatalf("own branches %s", got)
	}
	ss, err := r.serviceSession(s.ID)
	if err != nil || len(ss.Bounds) != 1 || ss.Bounds[0].Secret.Value.Reveal() != tok {
		t.Fatalf("bound: %+v %v", ss, err)
	}
	env := strings.Join(r.serviceEnvOf(&s), "\n")
	if strings.Contains(env, tok) || !strings.Contains(env, "GH_TOKEN="+s.Services[0].Placeholder) || !strings.Contains(env, "GIT_CONFIG_KEY_0=credential.https://github.com.helper") {
		t.Fatalf("the box's environment:\n%s", env)
	}
	if err := r.RemoveSecret(ben, "gh"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("ben removing ann's secret: %v", err)
	}
	if err := r.RemoveSecret(ann, "gh"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.serviceSession(s.ID); err == nil || !strings.Contains(err.Error(), "was removed by ann") {
		t.Fatalf("after rm: %v", err)
	}
}

// TestOwnersSecretsInTheKeyring: where the host has an OS keyring, the
// Runner's own user's service credentials go there, not to a file;
// another person's stay in their 0600 file.
func TestOwnersSecretsInTheKeyring(t *testing.T) {
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent-test-bus")
	keyring.MockInit()
	cfg := config.Default()
	cfg.Proxy.Listen, cfg.Web.Listen = "127.0.0.1:0", "127.0.0.1:0"
	dir := filepath.Join(t.TempDir(), "state")
	r, err := New(Options{StateDir: dir, Config: cfg, Env: []string{"CLAUDE_CODE_OAUTH_TOKEN=sk-fake-owner-cred-0000000000"}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	self := people.With(context.Background(), people.Person{UID: r.self.UID, Name: r.self.Name})
	st, err := r.SetSecret(self, service.Secret{Name: "gh", Kind: service.GitHub, Value: secret.New("ghp_in_the_keyring_0001")})
	if err != nil || st.Where != "the OS keyring" {
		t.Fatalf("the owner's: %+v %v", st, err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "users", "*", "secrets.json")); len(m) != 0 {
		t.Fatalf("a file as well: %v", m)
	}
	if l, err := r.ListSecrets(self); err != nil || len(l) != 1 {
		t.Fatalf("list: %v %v", l, err)
	}
	ann := people.With(context.Background(), people.Person{UID: 4243101, Name: "ann"})
	st, err = r.SetSecret(ann, service.Secret{Name: "gh", Kind: service.GitHub, Value: secret.New("ghp_ann_0002")})
	if err != nil || !strings.HasSuffix(st.Where, "secrets.json (mode 0600)") {
		t.Fatalf("ann's: %+v %v", st, err)
	}
	if l, _ := r.ListSecrets(ann); len(l) != 1 {
		t.Fatalf("ann sees %v", l)
	}
}
