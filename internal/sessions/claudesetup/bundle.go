// Package claudesetup brings the owner's Claude Code setup into a box:
// CLAUDE.md, settings.json, agents/, commands/, skills/, output-styles/,
// installed plugins/ and the user-scope MCP servers of .claude.json.
//
// The CLI reads the setup as the person who runs it (Locate, Collect) and
// sends it with the create request as a Bundle; the Runner never reads a
// user's home. The Runner checks the Bundle again (Check: it is untrusted
// bytes from the socket), keeps it in its state directory until the
// session's first start, and writes it into the box's Claude config dir
// then (Plan for the files; MergeSettings and MergeClaudeJSON for the two
// JSON files, before paddock's own seeding, whose keys win). After that
// the box's copy is the box's: a wake or restart does not apply it again.
//
// What never comes along: .credentials.json, transcripts (projects/),
// caches, todos, shell snapshots, statsig and anything else outside the
// allow list (Roots); credential helpers and the settings that point
// claude at another credential, endpoint, proxy or CA (FilterSettings);
// MCP server env and header values named like or looking like secrets
// (FilterMCPServers). Each drop is a Warning naming what was dropped,
// never its value.
package claudesetup

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/sessions/boxfiles"
)

// Caps on one Bundle, checked by Collect (which skips the largest parts
// to fit) and again by Check (which refuses).
const (
	MaxBytes = 8 << 20 // file contents plus settings and mcpServers
	MaxFiles = 4000
)

// Roots are what of a Claude config dir comes along: the files, and the
// directories whose whole trees do.
var (
	RootFiles = []string{"CLAUDE.md"}
	RootDirs  = []string{"agents", "commands", "skills", "output-styles", "plugins"}
)

// Bundle is a Claude setup as it travels in a create request.
type Bundle struct {
	// Files are CLAUDE.md and the files under RootDirs, by path relative
	// to the config dir, "/"-separated.
	Files []File `json:"files,omitempty"`
	// Settings is settings.json after FilterSettings: a JSON object, or
	// empty.
	Settings json.RawMessage `json:"settings,omitempty"`
	// MCPServers is .claude.json's "mcpServers" after FilterMCPServers: a
	// JSON object of server name to server, or empty.
	MCPServers json.RawMessage `json:"mcp_servers,omitempty"`
	// HostDir is the config dir it was read from, on the host: absolute
	// paths under it in plugins/*.json (where Claude Code records where
	// it installed each plugin) are moved to the box's config dir.
	HostDir string `json:"host_dir,omitempty"`
}

// File is one file of a Bundle. Mode is 0644, or 0755 for a file with an
// execute bit on the host.
type File struct {
	Path string `json:"path"`
	Mode uint32 `json:"mode"`
	Data []byte `json:"data"`
}

// Warning is something of the setup that did not come along, and why. It
// names keys and paths, never a value.
type Warning struct {
	Item   string `json:"item"`
	Reason string `json:"reason"`
}

func (w Warning) String() string { return w.Item + ": " + w.Reason }

// IsZero reports whether the Bundle brings nothing.
func (b *Bundle) IsZero() bool {
	return b == nil || len(b.Files) == 0 && len(b.Settings) == 0 && len(b.MCPServers) == 0
}

// Size is what counts against MaxBytes.
func (b *Bundle) Size() int64 {
	n := int64(len(b.Settings) + len(b.MCPServers))
	for _, f := range b.Files {
		n += int64(len(f.Data))
	}
	return n
}

// Summary says in a few words what the Bundle brings, for the person who
// runs paddock: "14 files (52.3 KiB), settings.json, 2 MCP servers".
func (b *Bundle) Summary() string {
	parts := []string{fmt.Sprintf("%d files (%s)", len(b.Files), human(b.Size()))}
	if len(b.Settings) > 0 {
		parts = append(parts, "settings.json")
	}
	if n := countKeys(b.MCPServers); n > 0 {
		parts = append(parts, fmt.Sprintf("%d MCP servers", n))
	}
	return strings.Join(parts, ", ")
}

func countKeys(raw json.RawMessage) int {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return 0
	}
	return len(m)
}

// allowed reports whether a clean relative path is in Roots.
func allowed(p string) bool {
	for _, f := range RootFiles {
		if p == f {
			return true
		}
	}
	for _, d := range RootDirs {
		if strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// Check is the Runner's check of a Bundle from a request: every path
// clean, relative, in Roots and given once, no path both a file and
// another's directory; modes 0644 or 0755; HostDir absolute and clean or
// empty; at most MaxFiles files and MaxBytes bytes; Settings and
// MCPServers JSON objects, which it filters again (the CLI did already;
// another client may not have), returning the warnings of that. An error
// says what is wrong and changes nothing; the caller refuses the request.
func Check(b *Bundle) ([]Warning, error) {
	if b == nil {
		return nil, nil
	}
	if len(b.Files) > MaxFiles {
		return nil, fmt.Errorf("claude setup: %d files, more than %d: %w", len(b.Files), MaxFiles, errdefs.ErrInvalid)
	}
	if n := b.Size(); n > MaxBytes {
		return nil, fmt.Errorf("claude setup: %d bytes, more than %d (%d MiB): %w", n, MaxBytes, MaxBytes>>20, errdefs.ErrInvalid)
	}
	if b.HostDir != "" && (!strings.HasPrefix(b.HostDir, "/") || path.Clean(b.HostDir) != b.HostDir || strings.ContainsAny(b.HostDir, "\x00\n")) {
		return nil, fmt.Errorf("claude setup: host dir %q is not a clean absolute path: %w", b.HostDir, errdefs.ErrInvalid)
	}
	bf := make([]boxfiles.File, len(b.Files))
	for i, f := range b.Files {
		if err := boxfiles.CheckPath(f.Path); err != nil {
			return nil, fmt.Errorf("claude setup: %w", err)
		}
		if !allowed(f.Path) {
			return nil, fmt.Errorf("claude setup: %q is not CLAUDE.md nor under %s: %w", f.Path, strings.Join(RootDirs, "/, ")+"/", errdefs.ErrInvalid)
		}
		if f.Mode != 0o644 && f.Mode != 0o755 {
			return nil, fmt.Errorf("claude setup: %s: mode %#o is not 0644 or 0755: %w", f.Path, f.Mode, errdefs.ErrInvalid)
		}
		bf[i] = boxfiles.File{Path: f.Path, Mode: fs.FileMode(f.Mode), Data: f.Data}
	}
	if err := boxfiles.Check(bf, MaxBytes); err != nil {
		return nil, fmt.Errorf("claude setup: %w", err)
	}
	var ws []Warning
	if len(b.Settings) > 0 {
		if _, err := decode(b.Settings); err != nil {
			return nil, fmt.Errorf("claude setup: settings: %v: %w", err, errdefs.ErrInvalid)
		}
		var w []Warning
		b.Settings, w = FilterSettings(b.Settings)
		ws = append(ws, w...)
	}
	if len(b.MCPServers) > 0 {
		if _, err := decode(b.MCPServers); err != nil {
			return nil, fmt.Errorf("claude setup: mcp servers: %v: %w", err, errdefs.ErrInvalid)
		}
		var w []Warning
		b.MCPServers, w = FilterMCPServers(b.MCPServers)
		ws = append(ws, w...)
	}
	return ws, nil
}

// Plan is what the Runner writes of a checked Bundle into a box, relative
// to the box user's home: each file under configDir (the config dir,
// relative to the home, e.g. ".claude"), with the host config dir in the
// strings of plugins/*.json replaced by boxConfigDir (the absolute one in
// the box). settings.json and .claude.json are not in it: they are merged
// into the box's own (MergeSettings, MergeClaudeJSON).
func Plan(b *Bundle, configDir, boxConfigDir string) []boxfiles.File {
	if b == nil {
		return nil
	}
	out := make([]boxfiles.File, 0, len(b.Files))
	for _, f := range b.Files {
		data := f.Data
		if b.HostDir != "" && b.HostDir != "/" && path.Dir(f.Path) == "plugins" && strings.HasSuffix(f.Path, ".json") {
			data = movePaths(data, b.HostDir, boxConfigDir)
		}
		out = append(out, boxfiles.File{Path: path.Join(configDir, f.Path), Mode: fs.FileMode(f.Mode), Data: data})
	}
	return out
}

// movePaths replaces from with to at the start of every JSON string in
// data that is from or begins with from + "/". Data that is not JSON is
// returned as it is.
func movePaths(data []byte, from, to string) []byte {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers as written
	var v any
	if dec.Decode(&v) != nil {
		return data
	}
	changed := false
	var walk func(v any) any
	walk = func(v any) any {
		switch t := v.(type) {
		case string:
			if t == from || strings.HasPrefix(t, from+"/") {
				changed = true
				return to + t[len(from):]
			}
		case map[string]any:
			for k, e := range t {
				t[k] = walk(e)
			}
		case []any:
			for i, e := range t {
				t[i] = walk(e)
			}
		}
		return v
	}
	v = walk(v)
	if !changed {
		return data
	}
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return data
	}
	return out
}

// MergeSettings lays the user's settings over the box's settings.json:
// each top-level key of user replaces the box's. The caller seeds
// paddock's keys after this, so paddock's win. A box file that is not a
// JSON object (or blank) is returned as it is, for the seeding to keep
// aside; so is everything when user is empty.
func MergeSettings(existing []byte, user json.RawMessage) []byte {
	return mergeTop(existing, user, func(doc, u map[string]any) {
		for k, v := range u {
			doc[k] = v
		}
	})
}

// MergeClaudeJSON adds the user's MCP servers to the box's .claude.json
// under "mcpServers", each replacing a server of the same name; other
// servers and keys stay. As MergeSettings for what is not an object.
func MergeClaudeJSON(existing []byte, mcpServers json.RawMessage) []byte {
	return mergeTop(existing, mcpServers, func(doc, u map[string]any) {
		servers, _ := doc["mcpServers"].(map[string]any)
		if servers == nil {
			servers = map[string]any{}
		}
		for k, v := range u {
			servers[k] = v
		}
		doc["mcpServers"] = servers
	})
}

func mergeTop(existing []byte, user json.RawMessage, merge func(doc, u map[string]any)) []byte {
	if len(user) == 0 {
		return existing
	}
	u, err := decode(user)
	if err != nil {
		return existing
	}
	doc := map[string]any{}
	if strings.Trim(string(existing), " \t\r\n") != "" {
		if doc, err = decode(existing); err != nil {
			return existing
		}
	}
	merge(doc, u)
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return existing
	}
	return out
}
