// Package credential holds the owner's Anthropic credential: its kinds, how
// each travels on the wire, and where paddock finds it.
//
// Sources, first match wins: a credential given for one session (the
// Runner keeps those), then what `paddock credential set` stored (the OS
// keyring where one is available, else a 0600 file in the state
// directory), then the environment of `paddock serve`
// (CLAUDE_CODE_OAUTH_TOKEN, ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, in that
// order), then Claude Code's own login file, read and never refreshed. The secret itself is a secret.Value
// and never printed; Status describes a credential without it.
package credential

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/paddockhq/paddock/internal/base/atomicfile"
	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/credentials/secret"
)

// Kind is how a credential authenticates, which decides the header it
// travels in and the variable Claude Code reads it from.
type Kind string

// The kinds Claude Code understands.
const (
	// KindOAuth is a setup token (`claude setup-token`) or OAuth access token.
	KindOAuth Kind = "oauth"
	// KindAPIKey is a Console API key.
	KindAPIKey Kind = "api_key"
	// KindAuthToken is a bearer token for a gateway (ANTHROPIC_AUTH_TOKEN).
	KindAuthToken Kind = "auth_token"
)

// Kinds lists every kind, in source-lookup order for the environment.
var Kinds = []Kind{KindOAuth, KindAPIKey, KindAuthToken}

// ParseKind reads a kind name.
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds {
		if string(k) == s {
			return k, nil
		}
	}
	return "", fmt.Errorf("%q is not a credential kind (oauth, api_key, auth_token): %w", s, errdefs.ErrInvalid)
}

// EnvVar is the variable Claude Code reads this kind from.
func (k Kind) EnvVar() string {
	switch k {
	case KindOAuth:
		return "CLAUDE_CODE_OAUTH_TOKEN"
	case KindAPIKey:
		return "ANTHROPIC_API_KEY"
	case KindAuthToken:
		return "ANTHROPIC_AUTH_TOKEN"
	}
	return ""
}

// Header is the canonical HTTP header this kind travels in.
func (k Kind) Header() string {
	if k == KindAPIKey {
		return "X-Api-Key"
	}
	return "Authorization"
}

// HeaderValue is the header value that carries s for this kind.
func (k Kind) HeaderValue(s secret.Value) string {
	if k == KindAPIKey {
		return s.Reveal()
	}
	return "Bearer " + s.Reveal()
}

// FromHeaderValue extracts the secret from a header value of this kind; ok
// is false when the value is not in the kind's form.
func (k Kind) FromHeaderValue(v string) (secret.Value, bool) {
	if k == KindAPIKey {
		return secret.New(v), v != ""
	}
	// RFC 9110: the auth scheme is case-insensitive, one space after it.
	if len(v) < 8 || !strings.EqualFold(v[:7], "bearer ") {
		return secret.Value{}, false
	}
	t := v[7:]
	return secret.New(t), t != "" && !strings.ContainsAny(t, " \t")
}

// DetectKind guesses the kind from Anthropic's key prefixes.
func DetectKind(s secret.Value) (Kind, bool) {
	v := s.Reveal()
	switch {
	case strings.HasPrefix(v, "sk-ant-oat"):
		return KindOAuth, true
	case strings.HasPrefix(v, "sk-ant-api"):
		return KindAPIKey, true
	}
	return "", false
}

// Credential is the owner's credential as found.
type Credential struct {
	Kind   Kind
	Secret secret.Value
	Source string // "file:<path>", "env:<VAR>" or "claude-login:<path>"
	// Expires is when the credential stops working; zero if unknown.
	Expires time.Time
	// Plan is the subscription an OAuth token belongs to, where known.
	Plan Plan
	// User is whose credential this is: the host user who stored it (the
	// Runner's owner for its own). It names, never reveals, the credential
	// in decision logs and metrics.
	User string
}

// Plan describes a subscription, for Claude Code's model defaults.
type Plan struct {
	SubscriptionType string `json:"subscription_type,omitempty" toml:"subscription_type"` // "pro", "max", …
	RateLimitTier    string `json:"rate_limit_tier,omitempty" toml:"rate_limit_tier"`
	Scopes           string `json:"scopes,omitempty" toml:"scopes"` // space-separated
}

// Env is the plan as Claude Code reads it for an OAuth token from the
// environment; empty fields are left out.
func (p Plan) Env() []string {
	var env []string
	if p.SubscriptionType != "" {
		env = append(env, "CLAUDE_CODE_SUBSCRIPTION_TYPE="+p.SubscriptionType)
	}
	if p.RateLimitTier != "" {
		env = append(env, "CLAUDE_CODE_RATE_LIMIT_TIER="+p.RateLimitTier)
	}
	if p.Scopes != "" {
		env = append(env, "CLAUDE_CODE_OAUTH_SCOPES="+p.Scopes)
	}
	return env
}

// Merge fills p's empty fields from o.
func (p Plan) Merge(o Plan) Plan {
	if p.SubscriptionType == "" {
		p.SubscriptionType = o.SubscriptionType
	}
	if p.RateLimitTier == "" {
		p.RateLimitTier = o.RateLimitTier
	}
	if p.Scopes == "" {
		p.Scopes = o.Scopes
	}
	return p
}

// Status describes a credential without its secret; safe to print and send.
type Status struct {
	Present bool   `json:"present"`
	Kind    Kind   `json:"kind,omitempty"`
	Source  string `json:"source,omitempty"`
	// Fingerprint is the first 12 hex digits of the secret's SHA-256, enough
	// to tell two credentials apart and useless to an attacker.
	Fingerprint string `json:"fingerprint,omitempty"`
	Length      int    `json:"length,omitempty"`
	// Plan and Expires where known.
	Plan    Plan       `json:"plan,omitempty"`
	Expires *time.Time `json:"expires,omitempty"`
	// User is whose credential it is (Credential.User).
	User string `json:"user,omitempty"`
}

// Status returns the printable description of c.
func (c Credential) Status() Status {
	sum := sha256.Sum256([]byte(c.Secret.Reveal()))
	st := Status{Present: true, Kind: c.Kind, Source: c.Source, Fingerprint: hex.EncodeToString(sum[:6]), Length: c.Secret.Len(), Plan: c.Plan, User: c.User}
	if !c.Expires.IsZero() {
		e := c.Expires
		st.Expires = &e
	}
	return st
}

// ErrMissing is wrapped when no source holds a credential.
var ErrMissing = fmt.Errorf("no credential: store one with `paddock credential set` (reads stdin) or start `paddock serve` with CLAUDE_CODE_OAUTH_TOKEN or ANTHROPIC_API_KEY set: %w", errdefs.ErrUnavailable)

// Provider gives the current owner credential.
type Provider interface {
	// Current returns the credential to use now, or an error wrapping ErrMissing.
	Current() (Credential, error)
}

// fileDoc is the credential file's format.
type fileDoc struct {
	Version int    `json:"version"`
	Kind    Kind   `json:"kind"`
	Secret  string `json:"secret"`
	SetAt   string `json:"set_at"`
}

// File is the 0600 credential file in the state directory.
type File struct{ Path string }

// Save writes the credential atomically with mode 0600.
func (f File) Save(kind Kind, s secret.Value) error {
	if s.IsZero() {
		return fmt.Errorf("the credential is empty: %w", errdefs.ErrInvalid)
	}
	if strings.ContainsAny(s.Reveal(), " \t\r\n") {
		return fmt.Errorf("the credential contains white space; paste only the token: %w", errdefs.ErrInvalid)
	}
	if kind.EnvVar() == "" {
		return fmt.Errorf("unknown credential kind %q: %w", kind, errdefs.ErrInvalid)
	}
	b, err := json.Marshal(fileDoc{Version: 1, Kind: kind, Secret: s.Reveal(), SetAt: time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		return err
	}
	return atomicfile.Write(f.Path, append(b, '\n'), 0o600)
}

// Load reads the file; a missing file wraps ErrMissing.
func (f File) Load() (Credential, error) {
	b, err := os.ReadFile(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return Credential{}, ErrMissing
	}
	if err != nil {
		return Credential{}, fmt.Errorf("read credential file: %w", err)
	}
	if fi, err := os.Stat(f.Path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return Credential{}, fmt.Errorf("credential file %s is readable by others (mode %v); run chmod 600 on it: %w", f.Path, fi.Mode().Perm(), errdefs.ErrForbidden)
	}
	var d fileDoc
	if err := json.Unmarshal(b, &d); err != nil || d.Version != 1 || d.Kind.EnvVar() == "" || d.Secret == "" {
		// Never echo the file: it holds the secret.
		return Credential{}, fmt.Errorf("credential file %s is damaged; store it again with `paddock credential set`: %w", f.Path, errdefs.ErrInvalid)
	}
	return Credential{Kind: d.Kind, Secret: secret.New(d.Secret), Source: "file:" + f.Path}, nil
}

// Remove deletes the file; a missing file is not an error.
func (f File) Remove() error {
	if err := os.Remove(f.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// FromEnv finds a credential in env (a snapshot of `paddock serve`'s
// environment, as from os.Environ), in Kinds order.
func FromEnv(env []string) (Credential, bool) {
	vals := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vals[k] = v
		}
	}
	for _, k := range Kinds {
		if v := strings.TrimSpace(vals[k.EnvVar()]); v != "" {
			return Credential{Kind: k, Secret: secret.New(v), Source: "env:" + k.EnvVar()}, true
		}
	}
	return Credential{}, false
}

// LoginFile is Claude Code's own login file (~/.claude/.credentials.json),
// read and never written: paddock never refreshes the token, because
// refresh tokens rotate and a refresh by paddock would sign the owner's
// own Claude Code out.
type LoginFile struct{ Path string }

// Load reads the OAuth access token, its expiry and plan.
func (l LoginFile) Load() (Credential, error) {
	b, err := os.ReadFile(l.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return Credential{}, ErrMissing
	}
	if err != nil {
		return Credential{}, fmt.Errorf("read Claude Code's login file: %w", err)
	}
	var doc struct {
		OAuth *struct {
			AccessToken      string   `json:"accessToken"`
			ExpiresAt        int64    `json:"expiresAt"`
			Scopes           []string `json:"scopes"`
			SubscriptionType string   `json:"subscriptionType"`
			RateLimitTier    string   `json:"rateLimitTier"`
		} `json:"claudeAiOauth"`
	}
	if json.Unmarshal(b, &doc) != nil || doc.OAuth == nil || doc.OAuth.AccessToken == "" {
		return Credential{}, fmt.Errorf("the login file of Claude Code (%s) holds no OAuth token: %w", l.Path, errdefs.ErrInvalid)
	}
	c := Credential{Kind: KindOAuth, Secret: secret.New(doc.OAuth.AccessToken), Source: "claude-login:" + l.Path,
		Plan: Plan{SubscriptionType: doc.OAuth.SubscriptionType, RateLimitTier: doc.OAuth.RateLimitTier, Scopes: strings.Join(doc.OAuth.Scopes, " ")}}
	if doc.OAuth.ExpiresAt > 0 {
		c.Expires = time.UnixMilli(doc.OAuth.ExpiresAt).UTC()
	}
	return c, nil
}

// ErrExpired is wrapped when the credential found has expired.
var ErrExpired = fmt.Errorf("credential expired: %w", errdefs.ErrUnavailable)

// Usable refuses an expired credential with a message that says what to do.
func (c Credential) Usable(now time.Time) error {
	if c.Expires.IsZero() || now.Before(c.Expires) {
		return nil
	}
	hint := "store a new one with `paddock credential set`"
	if strings.HasPrefix(c.Source, "claude-login:") {
		hint = "log in again with `claude` on this machine (paddock reads that login but never refreshes it: a refresh would sign your own Claude Code out), or store a setup token with `paddock credential set`"
	}
	return fmt.Errorf("the %s credential from %s expired at %s; %s: %w", c.Kind, c.Source, c.Expires.Format(time.RFC3339), hint, ErrExpired)
}

// PaddockLoginSource starts the Source of a credential from paddock's own
// login (paddock credential login), which the Runner refreshes.
const PaddockLoginSource = "paddock-login:"

// Chain is the Runner's Provider: the file first, then the environment
// captured at start, then Claude Code's own login file. It re-reads the file when it changes (checked at most
// once per RecheckEvery while it has a credential, on every call while it
// has none), so `paddock credential set` takes effect without a Runner
// restart.
type Chain struct {
	File File
	// Keyring, if Account is set, is read after the file.
	Keyring Keyring
	// Paddock, if set, is paddock's own login (internal/credentials/oauth's Authority),
	// read after the keyring and before the environment. It is asked on
	// every call: it refreshes itself in memory.
	Paddock interface {
		Current() (Credential, error)
		Present() bool
	}
	Env   []string
	Login LoginFile // Path "" skips it
	// Plan from the configuration fills what the source does not say.
	Plan         Plan
	RecheckEvery time.Duration

	mu        sync.Mutex
	checked   time.Time
	stamp     [2]fileStamp // the credential file and the login file
	cached    Credential
	cachedErr error
}

type fileStamp struct {
	mod  time.Time
	size int64
	ino  uint64
	ok   bool
}

func stampOf(p string) fileStamp {
	if p == "" {
		return fileStamp{}
	}
	fi, err := os.Stat(p)
	if err != nil {
		return fileStamp{}
	}
	st := fileStamp{mod: fi.ModTime(), size: fi.Size(), ok: true}
	if s, ok := fi.Sys().(interface{ Ino() uint64 }); ok {
		st.ino = s.Ino()
	}
	return st
}

// Invalidate makes the next Current look again at once (after paddock's
// own login was made or dropped).
func (c *Chain) Invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checked, c.stamp = time.Time{}, [2]fileStamp{}
	c.cached, c.cachedErr = Credential{}, nil
}

// Current implements Provider.
func (c *Chain) Current() (Credential, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	// A failure is not kept for the period: a Runner with no credential
	// (or a damaged one) looks again on every call, so one stored with
	// paddock credential set is used at once. Those calls fail anyway.
	if !c.checked.IsZero() && now.Sub(c.checked) < c.RecheckEvery && c.cachedErr == nil {
		if c.Paddock != nil && strings.HasPrefix(c.cached.Source, PaddockLoginSource) {
			return c.paddock() // refreshed in memory: never a stale copy
		}
		return c.cached, c.cachedErr
	}
	c.checked = now
	st := [2]fileStamp{stampOf(c.File.Path), stampOf(c.Login.Path)}
	if st == c.stamp && c.cachedErr == nil && !c.cached.Secret.IsZero() {
		if c.Paddock != nil && strings.HasPrefix(c.cached.Source, PaddockLoginSource) {
			return c.paddock()
		}
		return c.cached, c.cachedErr
	}
	c.stamp = st
	c.cached, c.cachedErr = c.resolve()
	return c.cached, c.cachedErr
}

func (c *Chain) resolve() (Credential, error) {
	cred, err := c.resolveSource()
	if err != nil {
		// Only a marker of paddock's login survives (no secret): the next
		// call asks the login again.
		return Credential{Source: cred.Source}, err
	}
	if cred.Kind == KindOAuth {
		cred.Plan = c.Plan.Merge(cred.Plan) // configuration first
	}
	return cred, nil
}

func (c *Chain) resolveSource() (Credential, error) {
	cred, err := c.File.Load()
	if err == nil {
		return cred, nil
	}
	if !errors.Is(err, ErrMissing) {
		return Credential{}, err // a damaged or unsafe file is an error, not a fall-through
	}
	if c.Keyring.Account != "" {
		cred, err := c.Keyring.Load()
		if err == nil || !errors.Is(err, ErrMissing) {
			return cred, err
		}
	}
	if c.Paddock != nil && c.Paddock.Present() {
		cred, err := c.paddock()
		if err != nil {
			return Credential{Source: PaddockLoginSource}, err
		}
		return cred, nil
	}
	if cred, ok := FromEnv(c.Env); ok {
		return cred, nil
	}
	if c.Login.Path != "" {
		cred, err := c.Login.Load()
		if err == nil || !errors.Is(err, ErrMissing) {
			return cred, err
		}
	}
	return Credential{}, ErrMissing
}

// paddock is paddock's login's credential now, with the configured plan.
func (c *Chain) paddock() (Credential, error) {
	cred, err := c.Paddock.Current()
	if err == nil {
		cred.Plan = c.Plan.Merge(cred.Plan)
	}
	return cred, err
}

// Static is a Provider that always returns one credential (tests, benchmarks).
type Static Credential

// Current implements Provider.
func (s Static) Current() (Credential, error) {
	if Credential(s).Secret.IsZero() {
		return Credential{}, ErrMissing
	}
	return Credential(s), nil
}
