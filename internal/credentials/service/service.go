// Package service holds the owner's credentials for services other than
// the model: a GitHub or GitLab token, or one header for one host. The
// Runner keeps them (a 0600 file per person in the state directory) and
// uses them on the way out of a box, for the requests a session's grant
// allows; a box only ever holds a placeholder that is worthless anywhere
// else. A secret's value is a secret.Value: never printed, logged or sent
// to a box; Status describes one without it.
package service

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/zalando/go-keyring"

	"github.com/paddockhq/paddock/internal/base/atomicfile"
	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/credentials/secret"
)

// Kind is what a credential is for, which decides the rules it is used by.
type Kind string

// The kinds.
const (
	// GitHub: a token for github.com (or a GitHub Enterprise host): git
	// over smart HTTP and the REST API, per repository.
	GitHub Kind = "github"
	// GitLab: a token for gitlab.com (or a self-managed host): git over
	// smart HTTP, per project.
	GitLab Kind = "gitlab"
	// Header: one header, added to requests to one host (and path prefix).
	Header Kind = "header"
)

// Kinds lists them.
var Kinds = []Kind{GitHub, GitLab, Header}

// ParseKind reads a kind's name.
func ParseKind(s string) (Kind, error) {
	if k := Kind(s); slices.Contains(Kinds, k) {
		return k, nil
	}
	return "", fmt.Errorf("%q is not a service credential kind (github, gitlab, header): %w", s, errdefs.ErrInvalid)
}

// DefaultHost is the kind's host when none is given.
func (k Kind) DefaultHost() string {
	switch k {
	case GitHub:
		return "github.com"
	case GitLab:
		return "gitlab.com"
	}
	return ""
}

// Secret is one stored service credential.
type Secret struct {
	Name  string       `json:"name"`
	Kind  Kind         `json:"kind"`
	Value secret.Value `json:"-"`
	// Host is the service's host: github.com, a GitHub Enterprise or
	// GitLab host, or the one host a header goes to.
	Host string `json:"host"`
	// Header kind: the header's name, and the path prefix it is added
	// under ("" for every path). The value is sent as it is stored (a
	// "Bearer " prefix, if the service wants one, is part of it).
	HeaderName string    `json:"header_name,omitempty"`
	PathPrefix string    `json:"path_prefix,omitempty"`
	SetAt      time.Time `json:"set_at"`
}

var validName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// ValidName checks a secret's name: lower-case letters, digits and
// dashes, starting with a letter, at most 32.
func ValidName(s string) error {
	if !validName.MatchString(s) {
		return fmt.Errorf("secret name %q: use lower-case letters, digits and dashes, starting with a letter, at most 32: %w", s, errdefs.ErrInvalid)
	}
	return nil
}

var validHost = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$`)

// validHeaderName is an HTTP token, not one paddock or HTTP itself owns.
var validHeaderName = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)

// Check validates a secret before it is stored.
func (s *Secret) Check() error {
	if err := ValidName(s.Name); err != nil {
		return err
	}
	if _, err := ParseKind(string(s.Kind)); err != nil {
		return err
	}
	if s.Value.IsZero() {
		return fmt.Errorf("secret %s is empty: %w", s.Name, errdefs.ErrInvalid)
	}
	if s.Value.Len() > 16<<10 || strings.ContainsAny(s.Value.Reveal(), "\r\n\x00") {
		return fmt.Errorf("secret %s holds a line break or NUL, or is over 16 KiB: paste only the token: %w", s.Name, errdefs.ErrInvalid)
	}
	if s.Host == "" {
		s.Host = s.Kind.DefaultHost()
	}
	s.Host = strings.ToLower(s.Host)
	if !validHost.MatchString(s.Host) {
		return fmt.Errorf("secret %s: host %q is not a DNS name: %w", s.Name, s.Host, errdefs.ErrInvalid)
	}
	switch s.Kind {
	case Header:
		if !validHeaderName.MatchString(s.HeaderName) {
			return fmt.Errorf("secret %s: a header credential needs --header NAME (letters, digits, dashes): %w", s.Name, errdefs.ErrInvalid)
		}
		switch strings.ToLower(s.HeaderName) {
		case "host", "content-length", "transfer-encoding", "connection", "upgrade", "proxy-authorization", "te", "trailer", "cookie":
			return fmt.Errorf("secret %s: %s is not a header paddock adds: %w", s.Name, s.HeaderName, errdefs.ErrInvalid)
		}
		if s.PathPrefix != "" && (!strings.HasPrefix(s.PathPrefix, "/") || strings.Contains(s.PathPrefix, "..") || strings.ContainsAny(s.PathPrefix, "?#%\\ ")) {
			return fmt.Errorf("secret %s: path prefix %q must start with / and hold no .., ?, #, %% or space: %w", s.Name, s.PathPrefix, errdefs.ErrInvalid)
		}
	default:
		if s.HeaderName != "" || s.PathPrefix != "" {
			return fmt.Errorf("secret %s: --header and --path-prefix are for header credentials: %w", s.Name, errdefs.ErrInvalid)
		}
	}
	return nil
}

// Fingerprint is the first 12 hex digits of the value's SHA-256: enough
// to tell two apart, useless to an attacker.
func Fingerprint(v secret.Value) string {
	sum := sha256.Sum256([]byte(v.Reveal()))
	return hex.EncodeToString(sum[:6])
}

// Status describes a secret without its value: safe to print and send.
type Status struct {
	Name        string    `json:"name"`
	Kind        Kind      `json:"kind"`
	Host        string    `json:"host"`
	HeaderName  string    `json:"header_name,omitempty"`
	PathPrefix  string    `json:"path_prefix,omitempty"`
	Fingerprint string    `json:"fingerprint"`
	Length      int       `json:"length"`
	SetAt       time.Time `json:"set_at"`
	// Where it is kept (Store.Where), when just stored.
	Where string `json:"where,omitempty"`
}

// Status describes s.
func (s Secret) Status() Status {
	return Status{Name: s.Name, Kind: s.Kind, Host: s.Host, HeaderName: s.HeaderName, PathPrefix: s.PathPrefix,
		Fingerprint: Fingerprint(s.Value), Length: s.Value.Len(), SetAt: s.SetAt}
}

// fileDoc is a person's secrets file.
type fileDoc struct {
	Version int                  `json:"version"`
	Secrets map[string]fileEntry `json:"secrets"`
}

type fileEntry struct {
	Secret
	Value string `json:"value"`
}

// File is one person's secrets: a 0600 JSON file the Runner alone writes.
type File struct{ Path string }

// ErrNotFound is wrapped when no secret has the name.
var ErrNotFound = fmt.Errorf("no such secret: %w", errdefs.ErrNotFound)

// Store keeps one person's secrets: File (a 0600 file), or Keyring (the
// OS keyring, for the Runner's own user where the host has one).
type Store interface {
	Get(name string) (Secret, error)
	List() ([]Secret, error)
	Save(s Secret) (Secret, error)
	Remove(name string) error
	// Where says where, for the person (never the value).
	Where() string
}

// backing reads and writes a store's document.
type backing interface {
	read() ([]byte, error) // nil, nil: none yet
	write([]byte) error
	damaged() error
}

func decode(bk backing) (fileDoc, error) {
	d := fileDoc{Version: 1, Secrets: map[string]fileEntry{}}
	b, err := bk.read()
	if err != nil || b == nil {
		return d, err
	}
	if err := json.Unmarshal(b, &d); err != nil || d.Version != 1 {
		// Never echo the document: it holds the secrets.
		return d, bk.damaged()
	}
	if d.Secrets == nil {
		d.Secrets = map[string]fileEntry{}
	}
	return d, nil
}

func encode(bk backing, d fileDoc) error {
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	return bk.write(append(b, '\n'))
}

func get(bk backing, name string) (Secret, error) {
	d, err := decode(bk)
	if err != nil {
		return Secret{}, err
	}
	e, ok := d.Secrets[name]
	if !ok {
		return Secret{}, fmt.Errorf("%w: %s; store it with paddock secret set %s --kind …", ErrNotFound, name, name)
	}
	s := e.Secret
	s.Value = secret.New(e.Value)
	return s, nil
}

func list(bk backing) ([]Secret, error) {
	d, err := decode(bk)
	if err != nil {
		return nil, err
	}
	out := make([]Secret, 0, len(d.Secrets))
	for _, e := range d.Secrets {
		s := e.Secret
		s.Value = secret.New(e.Value)
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Secret) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func save(bk backing, s Secret) (Secret, error) {
	if err := s.Check(); err != nil {
		return Secret{}, err
	}
	d, err := decode(bk)
	if err != nil {
		return Secret{}, err
	}
	if s.SetAt.IsZero() {
		s.SetAt = time.Now().UTC().Truncate(time.Second)
	}
	d.Secrets[s.Name] = fileEntry{Secret: s, Value: s.Value.Reveal()}
	return s, encode(bk, d)
}

func remove(bk backing, name string) error {
	d, err := decode(bk)
	if err != nil {
		return err
	}
	if _, ok := d.Secrets[name]; !ok {
		return fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	delete(d.Secrets, name)
	return encode(bk, d)
}

func (f File) read() ([]byte, error) {
	b, err := os.ReadFile(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the secrets file: %w", err)
	}
	if fi, err := os.Stat(f.Path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("the secrets file %s is readable by others (mode %v); run chmod 600 on it: %w", f.Path, fi.Mode().Perm(), errdefs.ErrForbidden)
	}
	return b, nil
}

func (f File) write(b []byte) error { return atomicfile.Write(f.Path, b, 0o600) }

func (f File) damaged() error {
	return fmt.Errorf("the secrets file %s is damaged; remove it and store the secrets again with paddock secret set: %w", f.Path, errdefs.ErrInvalid)
}

// Get returns the named secret.
func (f File) Get(name string) (Secret, error) { return get(f, name) }

// List returns every secret, by name.
func (f File) List() ([]Secret, error) { return list(f) }

// Save checks s and stores it, replacing one of its name.
func (f File) Save(s Secret) (Secret, error) { return save(f, s) }

// Remove deletes the named secret.
func (f File) Remove(name string) error { return remove(f, name) }

// Where is the file's path.
func (f File) Where() string { return f.Path + " (mode 0600)" }

// Keyring keeps the secrets in the OS keyring (the Secret Service),
// under service "paddock-services" and the state directory as the
// account: one document, as the file holds it.
type Keyring struct{ Account string }

const keyringService = "paddock-services"

func (k Keyring) read() ([]byte, error) {
	v, err := keyring.Get(keyringService, k.Account)
	if errors.Is(err, keyring.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("OS keyring: %v: %w", err, errdefs.ErrUnavailable)
	}
	return []byte(v), nil
}

func (k Keyring) write(b []byte) error {
	if err := keyring.Set(keyringService, k.Account, string(b)); err != nil {
		return fmt.Errorf("OS keyring: %v: %w", err, errdefs.ErrUnavailable)
	}
	return nil
}

func (k Keyring) damaged() error {
	return fmt.Errorf("the service credentials in the OS keyring are damaged; delete %s/%s there and store them again: %w", keyringService, k.Account, errdefs.ErrInvalid)
}

// Get returns the named secret.
func (k Keyring) Get(name string) (Secret, error) { return get(k, name) }

// List returns every secret, by name.
func (k Keyring) List() ([]Secret, error) { return list(k) }

// Save checks s and stores it, replacing one of its name.
func (k Keyring) Save(s Secret) (Secret, error) { return save(k, s) }

// Remove deletes the named secret.
func (k Keyring) Remove(name string) error { return remove(k, name) }

// Where says the OS keyring.
func (k Keyring) Where() string { return "the OS keyring" }

// PlaceholderPrefix starts every placeholder, so one is easy to spot.
const PlaceholderPrefix = "paddock-placeholder-"

// NewPlaceholder makes the stand-in a box holds for a secret: the prefix,
// the secret's name and 128 random bits. It is not a secret: it is worth
// nothing but to the Runner, on a request the session's grant allows.
func NewPlaceholder(name string) (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return PlaceholderPrefix + name + "-" + base64.RawURLEncoding.EncodeToString(b[:]), nil
}
