package portable

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/sessions/boxfiles"
	"github.com/paddockhq/paddock/internal/sessions/claudecode"
)

// Bounds on a conversation brought from the host (paddock run
// --resume-host): its files together, and how many.
const (
	MaxConversation      = 32 << 20
	MaxConversationFiles = 2000
)

// Conversation is one conversation Claude Code kept on the host, to be
// resumed in a new session's box: its id and its files, with paths
// relative to its project directory: <id>.jsonl (the transcript) and what
// Claude Code keeps under <id>/ (subagents' transcripts, tool results).
type Conversation struct {
	ID    string `json:"id"`
	Files []File `json:"files"`
}

// Check checks c as input from anyone: its id, each path (<id>.jsonl or
// under <id>/, clean and relative), at most MaxConversationFiles files and
// MaxConversation bytes, every .jsonl JSON lines, and a transcript with a
// message of the person's in it (there is nothing to resume without one).
func (c *Conversation) Check() error {
	if err := CheckConversationID(c.ID); err != nil {
		return err
	}
	if len(c.Files) > MaxConversationFiles {
		return bad("the conversation has %d files, more than %d", len(c.Files), MaxConversationFiles)
	}
	var total int64
	seen := map[string]bool{}
	var transcript []byte
	for _, f := range c.Files {
		if err := boxfiles.CheckPath(f.Path); err != nil {
			return err
		}
		if f.Path != c.ID+".jsonl" && !strings.HasPrefix(f.Path, c.ID+"/") {
			return bad("%s: not part of conversation %s (its files are %s.jsonl and under %s/)", clip(f.Path), c.ID, c.ID, c.ID)
		}
		if path.Base(f.Path) == CredentialFile {
			return bad("%s: a Claude Code login file; it never travels", clip(f.Path))
		}
		if seen[f.Path] {
			return bad("%s: twice", clip(f.Path))
		}
		seen[f.Path] = true
		if total += int64(len(f.Data)); total > MaxConversation {
			return bad("the conversation has more than %d bytes", MaxConversation)
		}
		if err := checkContent(f.Path, f.Data); err != nil {
			return err
		}
		if f.Path == c.ID+".jsonl" {
			transcript = f.Data
		}
	}
	if transcript == nil {
		return bad("conversation %s has no transcript (%s.jsonl)", c.ID, c.ID)
	}
	if !hasUserMessage(transcript) {
		return bad("conversation %s holds no message of yours: there is nothing to resume", c.ID)
	}
	return nil
}

// hasUserMessage reports whether a transcript has a line of type "user"
// (what claude --resume needs; launch looks for the same).
func hasUserMessage(b []byte) bool {
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		var l struct {
			Type string `json:"type"`
		}
		if bytes.Contains(line, []byte(`"user"`)) && json.Unmarshal(line, &l) == nil && l.Type == "user" {
			return true
		}
	}
	return false
}

// ClaudeFiles returns c's files as a box's Claude Code finds them when
// its cwd is cwd: under projects/<its project directory>/, sanitized. The
// notes say what sanitizing took out.
func (c *Conversation) ClaudeFiles(cwd string) ([]File, []string) {
	dir := path.Join("projects", claudecode.ProjectDirName(cwd))
	var out []File
	var notes []string
	for _, f := range c.Files {
		data, ns := sanitize(f.Path, f.Data)
		notes = append(notes, ns...)
		out = append(out, File{Path: path.Join(dir, f.Path), Data: data, ModTime: f.ModTime})
	}
	return out, notes
}

// HostOptions say which conversation ReadHost reads.
type HostOptions struct {
	// ConfigDir is the person's Claude Code config dir (~/.claude, or
	// CLAUDE_CONFIG_DIR): see claudesetup.Locate.
	ConfigDir string
	// Cwds are the directory the conversation was had in, as it may be
	// spelled (the workspace, its real path): the first whose project
	// directory exists is used.
	Cwds []string
	// ID names the conversation; "" takes the newest (by modification
	// time) of the project directory. A named one not found there is
	// looked for in every project directory.
	ID string
	// UID, when 0 or more, is whose files these must be: every directory
	// and file read below ConfigDir must belong to UID (the person, when
	// paddock runs as root under sudo). -1 checks nothing (the kernel's
	// checks of the person who runs paddock apply).
	UID int
}

// ReadHost reads one conversation Claude Code kept on the host, for
// paddock run --resume-host: never through a symlink below ConfigDir,
// regular files only, within MaxConversation and MaxConversationFiles.
// The result is checked (Conversation.Check). The warnings name files
// left out (not regular files).
func ReadHost(o HostOptions) (*Conversation, []string, error) {
	root, err := filepath.EvalSymlinks(o.ConfigDir)
	if err != nil {
		return nil, nil, fmt.Errorf("no conversation of Claude Code on this host: its config dir %s cannot be read (%v); give the one you use with --claude-config: %w", o.ConfigDir, err, errdefs.ErrNotFound)
	}
	projects := filepath.Join(root, "projects")
	if err := checkDir(projects, o.UID); err != nil {
		return nil, nil, fmt.Errorf("no conversations of Claude Code on this host (%v): %w", err, errdefs.ErrNotFound)
	}
	var dir string
	for _, cwd := range o.Cwds {
		d := filepath.Join(projects, claudecode.ProjectDirName(cwd))
		if checkDir(d, o.UID) == nil {
			dir = d
			break
		}
	}
	where := "for " + strings.Join(o.Cwds, " or ")
	var file string
	switch {
	case o.ID != "":
		if err := CheckConversationID(o.ID); err != nil {
			return nil, nil, err
		}
		if dir != "" && checkFile(filepath.Join(dir, o.ID+".jsonl"), o.UID) == nil {
			file = filepath.Join(dir, o.ID+".jsonl")
			break
		}
		// Had in another directory: look in every project directory.
		ents, _ := os.ReadDir(projects)
		for _, e := range ents {
			d := filepath.Join(projects, e.Name())
			if e.IsDir() && checkDir(d, o.UID) == nil && checkFile(filepath.Join(d, o.ID+".jsonl"), o.UID) == nil {
				dir, file = d, filepath.Join(d, o.ID+".jsonl")
				break
			}
		}
		if file == "" {
			return nil, nil, fmt.Errorf("no conversation %s of Claude Code in %s: give the id of one listed there (claude --resume shows them): %w", o.ID, projects, errdefs.ErrNotFound)
		}
	case dir == "":
		return nil, nil, fmt.Errorf("no conversation of Claude Code on this host %s (nothing in %s); start one there with claude, or name one with --resume-host=ID: %w", where, projects, errdefs.ErrNotFound)
	default:
		if file, err = newest(dir, o.UID); err != nil {
			return nil, nil, err
		}
	}
	id := strings.TrimSuffix(filepath.Base(file), ".jsonl")
	c := &Conversation{ID: id}
	var warnings []string
	var total int64
	add := func(rel, full string) error {
		if len(c.Files) >= MaxConversationFiles {
			return fmt.Errorf("conversation %s has more than %d files; paddock brings at most that many: %w", id, MaxConversationFiles, errdefs.ErrLimit)
		}
		data, mt, err := readFile(full, o.UID, MaxConversation-total)
		if err != nil {
			return err
		}
		total += int64(len(data))
		c.Files = append(c.Files, File{Path: rel, Data: data, ModTime: mt})
		return nil
	}
	if err := add(id+".jsonl", file); err != nil {
		return nil, nil, err
	}
	sub := filepath.Join(dir, id)
	if checkDir(sub, o.UID) == nil {
		err := filepath.WalkDir(sub, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			rel = filepath.ToSlash(rel)
			switch {
			case d.IsDir():
				if p != sub && checkDir(p, o.UID) != nil {
					warnings = append(warnings, rel+": left out (not the person's directory)")
					return fs.SkipDir
				}
				return nil
			case !d.Type().IsRegular():
				warnings = append(warnings, rel+": left out (not a regular file)")
				return nil
			case boxfiles.CheckPath(rel) != nil:
				warnings = append(warnings, fmt.Sprintf("%q: left out (a name paddock does not carry)", rel))
				return nil
			}
			return add(rel, p)
		})
		if err != nil {
			return nil, nil, err
		}
	}
	sort.Slice(c.Files, func(i, j int) bool { return c.Files[i].Path < c.Files[j].Path })
	if err := c.Check(); err != nil {
		return nil, nil, err
	}
	return c, warnings, nil
}

// newest returns the newest <uuid>.jsonl of dir.
func newest(dir string, uid int) (string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	var best string
	var bestTime int64
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || CheckConversationID(strings.TrimSuffix(name, ".jsonl")) != nil || !strings.HasSuffix(name, ".jsonl") {
			continue
		}
		fi, err := e.Info()
		if err != nil || !owned(fi, uid) {
			continue
		}
		if t := fi.ModTime().UnixNano(); best == "" || t > bestTime {
			best, bestTime = filepath.Join(dir, name), t
		}
	}
	if best == "" {
		return "", fmt.Errorf("no conversation of Claude Code in %s; start one there with claude, or name one with --resume-host=ID: %w", dir, errdefs.ErrNotFound)
	}
	return best, nil
}

// checkDir checks that p is a directory (not a symlink) of uid.
func checkDir(p string, uid int) error {
	fi, err := os.Lstat(p)
	switch {
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory (a symlink is never followed)", p)
	case !owned(fi, uid):
		return fmt.Errorf("%s does not belong to uid %d", p, uid)
	}
	return nil
}

// checkFile checks that p is a regular file (not a symlink) of uid.
func checkFile(p string, uid int) error {
	fi, err := os.Lstat(p)
	switch {
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file (a symlink is never followed)", p)
	case !owned(fi, uid):
		return fmt.Errorf("%s does not belong to uid %d", p, uid)
	}
	return nil
}

func owned(fi fs.FileInfo, uid int) bool {
	if uid < 0 {
		return true
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == uid
}

// readFile reads a regular file of uid, never through a symlink (the
// last component is opened with O_NOFOLLOW, and what was opened checked
// again), at most max bytes.
func readFile(p string, uid int, max int64) ([]byte, time.Time, error) {
	fh, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, time.Time{}, err
	}
	if !fi.Mode().IsRegular() || !owned(fi, uid) {
		return nil, time.Time{}, fmt.Errorf("%s: not a regular file of uid %d: %w", p, uid, errdefs.ErrInvalid)
	}
	tooBig := fmt.Errorf("%s: the conversation is larger than the %d MiB paddock brings: %w", p, MaxConversation>>20, errdefs.ErrLimit)
	if fi.Size() > max {
		return nil, time.Time{}, tooBig
	}
	data, err := io.ReadAll(io.LimitReader(fh, max+1))
	if err != nil {
		return nil, time.Time{}, err
	}
	if int64(len(data)) > max {
		return nil, time.Time{}, tooBig
	}
	return data, fi.ModTime().UTC(), nil
}
