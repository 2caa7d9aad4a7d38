package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zalando/go-keyring"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/credentials/secret"
)

const token = "ghp_0123456789abcdefTOKEN"

// TestFileStore: secrets are stored 0600, read back whole, listed by
// name, replaced and removed; a file others can read is refused; the
// status and every printed form show a fingerprint, never the value.
func TestFileStore(t *testing.T) {
	f := File{Path: filepath.Join(t.TempDir(), "secrets.json")}
	if l, err := f.List(); err != nil || len(l) != 0 {
		t.Fatalf("an absent file: %v %v", l, err)
	}
	s, err := f.Save(Secret{Name: "github", Kind: GitHub, Value: secret.New(token)})
	if err != nil {
		t.Fatal(err)
	}
	if s.Host != "github.com" {
		t.Fatalf("default host %q", s.Host)
	}
	if _, err := f.Save(Secret{Name: "tracker", Kind: Header, Host: "Tracker.Example.com", HeaderName: "X-Api-Key", PathPrefix: "/api", Value: secret.New("k-123")}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(f.Path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v %v", fi.Mode(), err)
	}
	got, err := f.Get("github")
	if err != nil || got.Value.Reveal() != token || got.Kind != GitHub {
		t.Fatalf("get: %+v %v", got, err)
	}
	l, _ := f.List()
	if len(l) != 2 || l[0].Name != "github" || l[1].Name != "tracker" || l[1].Host != "tracker.example.com" {
		t.Fatalf("list: %+v", l)
	}
	st := got.Status()
	b, _ := json.Marshal(st)
	for _, printed := range []string{string(b), fmt.Sprintf("%v %+v %#v", got, got, got), fmt.Sprint(st)} {
		if strings.Contains(printed, token) {
			t.Fatalf("the value printed: %s", printed)
		}
	}
	if st.Fingerprint != Fingerprint(secret.New(token)) || len(st.Fingerprint) != 12 || st.Length != len(token) {
		t.Fatalf("status %+v", st)
	}
	if err := f.Remove("github"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Get("github"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("after rm: %v", err)
	}
	if err := f.Remove("github"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("rm twice: %v", err)
	}
	os.Chmod(f.Path, 0o644)
	if _, err := f.List(); !errors.Is(err, errdefs.ErrForbidden) {
		t.Fatalf("a file others can read: %v", err)
	}
	os.Chmod(f.Path, 0o600)
	os.WriteFile(f.Path, []byte("{"+token), 0o600)
	if _, err := f.List(); !errors.Is(err, errdefs.ErrInvalid) || strings.Contains(err.Error(), token) {
		t.Fatalf("a damaged file: %v", err)
	}
}

// TestSecretCheck: what a stored secret must be.
func TestSecretCheck(t *testing.T) {
	for _, s := range []Secret{
		{Name: "Bad", Kind: GitHub, Value: secret.New("x")},
		{Name: "gh", Kind: "svn", Value: secret.New("x")},
		{Name: "gh", Kind: GitHub},
		{Name: "gh", Kind: GitHub, Value: secret.New("a\nb")},
		{Name: "gh", Kind: GitHub, Host: "bad host", Value: secret.New("x")},
		{Name: "gh", Kind: GitHub, Host: "localhost", Value: secret.New("x")},
		{Name: "gh", Kind: GitHub, HeaderName: "X", Value: secret.New("x")},
		{Name: "h", Kind: Header, Host: "a.example", Value: secret.New("x")},
		{Name: "h", Kind: Header, Host: "a.example", HeaderName: "Host", Value: secret.New("x")},
		{Name: "h", Kind: Header, Host: "a.example", HeaderName: "X-K", PathPrefix: "api", Value: secret.New("x")},
		{Name: "h", Kind: Header, Host: "a.example", HeaderName: "X-K", PathPrefix: "/a/../b", Value: secret.New("x")},
	} {
		if err := s.Check(); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("%+v: %v", s, err)
		}
	}
}

// TestParseGrant: NAME[:OWNER/REPO[:read|push]].
func TestParseGrant(t *testing.T) {
	for in, want := range map[string]string{
		"github:octo/app":         "github:octo/app:read",
		"github:octo/app:push":    "github:octo/app:push",
		"gl:grp/sub/proj:read":    "gl:grp/sub/proj:read",
		"tracker":                 "tracker",
		"github:octo/app.js:push": "github:octo/app.js:push",
	} {
		g, err := ParseGrant(in)
		if err != nil || g.String() != want {
			t.Errorf("%q: %q %v, want %q", in, g, err, want)
		}
	}
	for _, in := range []string{"", "GitHub:o/r", "gh:o", "gh:o/r:admin", "gh:o/r.git", "gh:o/../r", "gh:o/r:push:x", "gh:/r", "gh:o//r"} {
		if _, err := ParseGrant(in); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("%q: %v", in, err)
		}
	}
	g, _ := ParseGrant("gh:a/b/c")
	if g.CheckKind(GitHub) == nil || g.CheckKind(GitLab) != nil {
		t.Error("a three-part repository is GitLab's only")
	}
	g, _ = ParseGrant("gh")
	if g.CheckKind(GitHub) == nil || g.CheckKind(Header) != nil {
		t.Error("a github grant needs its repository; a header one none")
	}
}

// TestRefAllowed: a session's own branches, and nothing else.
func TestRefAllowed(t *testing.T) {
	own := []string{"paddock/s1", "feat/*"}
	for ref, want := range map[string]bool{
		"refs/heads/paddock/s1": true, "refs/heads/feat/a": true, "refs/heads/feat/a/b": true,
		"refs/heads/feat": false, "refs/heads/main": false, "refs/tags/paddock/s1": false, "paddock/s1": false,
		"refs/heads/feat/../main": false, "refs/heads/paddock/s1/x": false, "refs/heads/featx/a": false,
	} {
		if RefAllowed(ref, own) != want {
			t.Errorf("%s: %v", ref, !want)
		}
	}
	for _, p := range []string{"a", "a/b", "a/*"} {
		if err := ValidPushRef(p); err != nil {
			t.Errorf("%q: %v", p, err)
		}
	}
	for _, p := range []string{"", "*", "refs/heads/a", "a/**", "a b", "a..b", "/a", "a/", "a*"} {
		if ValidPushRef(p) == nil {
			t.Errorf("%q accepted", p)
		}
	}
}

func FuzzParseGrant(f *testing.F) {
	f.Add("github:octo/app:push")
	f.Add("a:00..0000/00") // a name with two dots in it is a name, not a step up
	f.Fuzz(func(t *testing.T, s string) {
		g, err := ParseGrant(s)
		if err != nil {
			return
		}
		if ValidName(g.Secret) != nil || strings.HasSuffix(g.Repo, ".git") {
			t.Fatalf("%q parsed to %+v", s, g)
		}
		for _, seg := range strings.Split(g.Repo, "/") {
			if g.Repo != "" && (seg == "" || seg == "." || seg == "..") {
				t.Fatalf("%q parsed to %+v: segment %q", s, g, seg)
			}
		}
		if g2, err := ParseGrant(g.String()); err != nil || g2 != g {
			t.Fatalf("%q: %+v does not round-trip: %+v %v", s, g, g2, err)
		}
	})
}

// TestKeyringStore: the keyring store keeps the same document as the
// file: read back whole, listed, removed; a damaged one refused without
// echoing it.
func TestKeyringStore(t *testing.T) {
	keyring.MockInit()
	k := Keyring{Account: "/var/lib/paddock-test"}
	if l, err := k.List(); err != nil || len(l) != 0 {
		t.Fatalf("an empty keyring: %v %v", l, err)
	}
	var st Store = k
	if _, err := st.Save(Secret{Name: "github", Kind: GitHub, Value: secret.New(token)}); err != nil {
		t.Fatal(err)
	}
	got, err := st.Get("github")
	if err != nil || got.Value.Reveal() != token || got.Host != "github.com" {
		t.Fatalf("get: %+v %v", got, err)
	}
	if st.Where() != "the OS keyring" {
		t.Fatal(st.Where())
	}
	if err := st.Remove("github"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get("github"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("after rm: %v", err)
	}
	keyring.Set(keyringService, k.Account, "{"+token)
	if _, err := st.List(); !errors.Is(err, errdefs.ErrInvalid) || strings.Contains(err.Error(), token) {
		t.Fatalf("damaged: %v", err)
	}
}
