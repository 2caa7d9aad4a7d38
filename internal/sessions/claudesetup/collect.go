package claudesetup

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/sessions/boxfiles"
)

// Source is where a Claude setup is read from.
type Source struct {
	// Home is the home directory of the person whose setup it is ("" if
	// unknown: then nothing is read but an explicit Dir).
	Home string
	// Dir is their Claude config dir: ~/.claude, or CLAUDE_CONFIG_DIR.
	Dir string
	// ClaudeJSON is the .claude.json whose "mcpServers" come along:
	// ~/.claude.json, or inside CLAUDE_CONFIG_DIR.
	ClaudeJSON string
}

// LocateOptions say whose setup `paddock run` brings.
type LocateOptions struct {
	// Env is the CLI's environment (HOME, CLAUDE_CONFIG_DIR, SUDO_USER).
	Env []string
	// Dir is --claude-config: read this config dir instead.
	Dir string
	// Root: the CLI runs as root, so SUDO_USER, if set, names the person.
	Root bool
	// LookupHome returns a user's home directory (os/user in the CLI).
	LookupHome func(user string) (string, error)
}

// Locate finds the setup to read, as Claude Code itself would for the
// person who runs paddock: the home is SUDO_USER's when paddock runs as
// root through sudo, else $HOME; the config dir is CLAUDE_CONFIG_DIR if
// set, else ~/.claude; .claude.json is inside CLAUDE_CONFIG_DIR when that
// is set, else ~/.claude.json.
//
// An explicit dir (--claude-config DIR) is read as CLAUDE_CONFIG_DIR is:
// DIR/.claude.json — or, when there is none and DIR is named .claude (the
// default layout: --claude-config ~/.claude), the .claude.json beside it.
// It must exist; a missing default setup is no error (nothing comes).
func Locate(o LocateOptions) (Source, error) {
	get := func(k string) string {
		for _, kv := range o.Env {
			if v, ok := strings.CutPrefix(kv, k+"="); ok {
				return v
			}
		}
		return ""
	}
	var src Source
	src.Home = get("HOME")
	if u := get("SUDO_USER"); o.Root && u != "" && u != "root" && o.LookupHome != nil {
		h, err := o.LookupHome(u)
		if err != nil {
			return Source{}, fmt.Errorf("look up the home of %s (SUDO_USER), whose Claude Code setup comes along: %w; skip it with --no-claude-config", u, err)
		}
		src.Home = h
	}
	if o.Dir != "" {
		dir, err := filepath.Abs(o.Dir)
		if err != nil {
			return Source{}, err
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return Source{}, fmt.Errorf("--claude-config %s is not a directory: %w", o.Dir, errdefs.ErrInvalid)
		}
		src.Dir, src.ClaudeJSON = dir, filepath.Join(dir, ".claude.json")
		if _, err := os.Lstat(src.ClaudeJSON); err != nil && filepath.Base(dir) == ".claude" {
			src.ClaudeJSON = filepath.Join(filepath.Dir(dir), ".claude.json")
		}
		return src, nil
	}
	if d := get("CLAUDE_CONFIG_DIR"); d != "" && strings.HasPrefix(d, "/") {
		src.Dir, src.ClaudeJSON = filepath.Clean(d), filepath.Join(d, ".claude.json")
		return src, nil
	}
	if src.Home == "" || !strings.HasPrefix(src.Home, "/") {
		return Source{}, nil // nobody's: nothing comes
	}
	src.Dir, src.ClaudeJSON = filepath.Join(src.Home, ".claude"), filepath.Join(src.Home, ".claude.json")
	return src, nil
}

// Limits on reading that keep a huge or odd setup from holding the CLI.
const (
	maxWalk       = 50000    // entries looked at under the config dir
	maxClaudeJSON = 64 << 20 // .claude.json holds much history; only mcpServers is kept
	maxSettings   = 1 << 20
)

// entry is a file found under the config dir, not read yet.
type entry struct {
	rel  string // path relative to the config dir, "/"-separated
	open string // the file to read: the entry itself, or a symlink's target
	size int64
	mode uint32
}

// Collect reads the setup at src: CLAUDE.md, settings.json (filtered),
// the trees of RootDirs, and the mcpServers of src.ClaudeJSON (filtered).
// It never fails for what it finds: a file it cannot read, a symlink that
// leads out of the config dir (never followed), a special file or a part
// over the caps is skipped with a Warning that names it. .git
// directories are skipped quietly. Over MaxBytes or MaxFiles, the largest
// parts go first (a part: one agent, command, skill or output style, one
// installed plugin, one marketplace) until the rest fits. An error is
// only for a src that cannot be read at all.
func Collect(src Source) (Bundle, []Warning, error) {
	var b Bundle
	var ws []Warning
	if src.Dir == "" {
		return b, nil, nil
	}
	root, err := filepath.EvalSymlinks(src.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		root = ""
	} else if err != nil {
		return b, nil, fmt.Errorf("claude setup %s: %w", src.Dir, err)
	}
	b.HostDir = filepath.Clean(src.Dir)
	var entries []entry
	if root != "" {
		entries, ws = walk(root)
		for i, e := range entries {
			if e.rel == "settings.json" {
				entries = append(entries[:i], entries[i+1:]...)
				if data, err := readEntry(e, maxSettings); err != nil {
					ws = append(ws, Warning{Item: "settings.json", Reason: "skipped: " + err.Error()})
				} else {
					var w []Warning
					b.Settings, w = FilterSettings(data)
					ws = append(ws, w...)
				}
				break
			}
		}
	}
	if src.ClaudeJSON != "" {
		servers, w := readMCPServers(src.ClaudeJSON)
		ws = append(ws, w...)
		if len(servers) > 0 {
			b.MCPServers, w = FilterMCPServers(servers)
			ws = append(ws, w...)
		}
	}
	entries, w := fit(entries, int64(len(b.Settings)+len(b.MCPServers)))
	ws = append(ws, w...)
	for _, e := range entries {
		data, err := readEntry(e, e.size)
		if err != nil {
			ws = append(ws, Warning{Item: e.rel, Reason: "skipped: " + err.Error()})
			continue
		}
		b.Files = append(b.Files, File{Path: e.rel, Mode: e.mode, Data: data})
	}
	return b, ws, nil
}

// walk lists the files of the allow list under root (a real path), with
// warnings for what it skips.
func walk(root string) ([]entry, []Warning) {
	var out []entry
	var ws []Warning
	seen := 0
	add := func(rel, full string, fi fs.FileInfo) {
		if err := boxfiles.CheckPath(rel); err != nil {
			ws = append(ws, Warning{Item: fmt.Sprintf("%q", rel), Reason: "skipped: a name paddock does not carry (control character, backslash or too long)"})
			return
		}
		switch {
		case fi.Mode().IsRegular():
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := filepath.EvalSymlinks(full)
			if err != nil {
				ws = append(ws, Warning{Item: rel, Reason: "skipped: a broken symlink"})
				return
			}
			if target != root && !strings.HasPrefix(target, root+string(filepath.Separator)) {
				ws = append(ws, Warning{Item: rel, Reason: "skipped: a symlink that leads out of " + root + " (never followed; copy the file in to bring it)"})
				return
			}
			tfi, err := os.Stat(target)
			if err != nil || !tfi.Mode().IsRegular() {
				ws = append(ws, Warning{Item: rel, Reason: "skipped: a symlink to a directory or special file (not followed)"})
				return
			}
			full, fi = target, tfi
		default:
			ws = append(ws, Warning{Item: rel, Reason: "skipped: not a regular file"})
			return
		}
		if fi.Size() > MaxBytes {
			ws = append(ws, Warning{Item: rel, Reason: fmt.Sprintf("skipped: %s, over the setup's cap of %d MiB", human(fi.Size()), MaxBytes>>20)})
			return
		}
		mode := uint32(0o644)
		if fi.Mode()&0o111 != 0 {
			mode = 0o755
		}
		out = append(out, entry{rel: rel, open: full, size: fi.Size(), mode: mode})
	}
	for _, name := range append(append([]string{}, RootFiles...), "settings.json") {
		full := filepath.Join(root, name)
		if fi, err := os.Lstat(full); err == nil {
			add(name, full, fi)
		}
	}
	for _, d := range RootDirs {
		top := filepath.Join(root, d)
		if fi, err := os.Lstat(top); err != nil || !fi.IsDir() {
			if err == nil {
				ws = append(ws, Warning{Item: d + "/", Reason: "skipped: not a directory (a symlink to one is not followed)"})
			}
			continue
		}
		err := filepath.WalkDir(top, func(full string, de fs.DirEntry, err error) error {
			rel, _ := filepath.Rel(root, full)
			rel = filepath.ToSlash(rel)
			if err != nil {
				ws = append(ws, Warning{Item: rel, Reason: "skipped: " + cause(err).Error()})
				if de != nil && de.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			if seen++; seen > maxWalk {
				ws = append(ws, Warning{Item: d + "/", Reason: fmt.Sprintf("more than %d entries in the setup; the rest skipped", maxWalk)})
				return fs.SkipAll
			}
			if de.IsDir() {
				if de.Name() == ".git" {
					return fs.SkipDir
				}
				return nil
			}
			fi, err := de.Info()
			if err != nil {
				return nil // gone meanwhile
			}
			add(rel, full, fi)
			return nil
		})
		if err != nil {
			ws = append(ws, Warning{Item: d + "/", Reason: "skipped in part: " + err.Error()})
		}
	}
	return out, ws
}

// readEntry reads a file found by walk, without following a symlink in
// its last component (walk resolved any), as a regular file of at most
// max bytes.
func readEntry(e entry, max int64) ([]byte, error) {
	f, err := os.OpenFile(e.open, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, cause(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%s, more than %s", human(fi.Size()), human(max))
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("grew past %s while read", human(max))
	}
	return data, nil
}

// readMCPServers returns the "mcpServers" value of a .claude.json, or
// nothing (and a warning, unless the file is simply absent).
func readMCPServers(file string) (json.RawMessage, []Warning) {
	fi, err := os.Stat(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	item := filepath.Base(file) + ": mcpServers"
	if err != nil || !fi.Mode().IsRegular() {
		return nil, []Warning{{Item: item, Reason: "skipped: cannot read " + file}}
	}
	data, err := readEntry(entry{open: file}, maxClaudeJSON)
	if err != nil {
		return nil, []Warning{{Item: item, Reason: "skipped: " + file + ": " + err.Error()}}
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, []Warning{{Item: item, Reason: "skipped: " + file + " is not a JSON object"}}
	}
	s := top["mcpServers"]
	if len(s) == 0 || string(s) == "null" || string(s) == "{}" {
		return nil, nil
	}
	return s, nil
}

// partOf is the unit a path is skipped in when the setup is over its caps:
// CLAUDE.md; one entry of agents/, commands/, skills/, output-styles/;
// plugins/cache/MARKETPLACE/PLUGIN; plugins/DIR/ENTRY (a marketplace);
// one file directly in plugins/.
func partOf(rel string) string {
	c := strings.Split(rel, "/")
	n := 2
	if c[0] == "plugins" {
		n = 3
		if len(c) > 1 && c[1] == "cache" {
			n = 4
		}
	}
	if len(c) > n {
		c = c[:n]
	}
	return strings.Join(c, "/")
}

// fit drops whole parts, the largest first, until the entries and extra
// bytes (settings, mcpServers) fit MaxBytes, and the entries MaxFiles.
func fit(entries []entry, extra int64) ([]entry, []Warning) {
	type part struct {
		bytes int64
		files int
	}
	parts := map[string]*part{}
	total, files := extra, 0
	for _, e := range entries {
		p := parts[partOf(e.rel)]
		if p == nil {
			p = &part{}
			parts[partOf(e.rel)] = p
		}
		p.bytes += e.size
		p.files++
		total += e.size
		files++
	}
	dropped := map[string]bool{}
	var ws []Warning
	for total > MaxBytes || files > MaxFiles {
		byBytes := total > MaxBytes
		var worst string
		for _, k := range sortedKeys(parts) {
			p, w := parts[k], parts[worst]
			if dropped[k] {
				continue
			}
			if worst == "" || byBytes && p.bytes > w.bytes || !byBytes && p.files > w.files {
				worst = k
			}
		}
		if worst == "" {
			break
		}
		p := parts[worst]
		dropped[worst] = true
		total -= p.bytes
		files -= p.files
		ws = append(ws, Warning{Item: worst, Reason: fmt.Sprintf("skipped: %s in %d files; the setup is over its cap of %d MiB and %d files (the largest parts are left out)",
			human(p.bytes), p.files, MaxBytes>>20, MaxFiles)})
	}
	if len(dropped) == 0 {
		return entries, nil
	}
	kept := entries[:0]
	for _, e := range entries {
		if !dropped[partOf(e.rel)] {
			kept = append(kept, e)
		}
	}
	sort.SliceStable(ws, func(i, j int) bool { return ws[i].Item < ws[j].Item })
	return kept, ws
}

// human prints a byte count for a person.
func human(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// cause is err without the path an *fs.PathError repeats.
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
