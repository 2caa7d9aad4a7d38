package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/paddockhq/paddock/internal/base/atomicfile"
	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/boxfiles"
	"github.com/paddockhq/paddock/internal/sessions/claudecode"
	"github.com/paddockhq/paddock/internal/sessions/claudesetup"
	"github.com/paddockhq/paddock/internal/sessions/firstprompt"
	"github.com/paddockhq/paddock/internal/sessions/gitident"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// firstStart is what a create request brings for the session's first
// start only: the creator's Claude Code setup, their git identity and the
// task claude starts with. The Runner keeps it in <state-dir>/session-setup
// /<id>.json (0600) from the create until claude has started once with it
// (launch removes it then), so a create with --no-start, or a first start
// that failed, still gets it at the first start that works. A wake, a
// restart or a set never applies it again: the box's copy is then the
// box's to change.
type firstStart struct {
	Claude *claudesetup.Bundle `json:"claude,omitempty"`
	Git    *gitident.Identity  `json:"git,omitempty"`
	Prompt firstprompt.Text    `json:"prompt,omitempty"`
}

// checkFirstStart checks what req brings for the first start, before
// anything of the session is recorded, with no I/O; nil when it brings
// nothing. A bad part refuses the request (it does not come from paddock
// run, whose own checks would have caught it); what of the Claude setup
// was dropped is returned, by name, for the log. The Claude Code version
// it asks for is checked here too, before anything is recorded or
// installed: the pinned one or one of allowed (claude.allowed_versions),
// never any version published on npm (which a root Runner would install
// for any member).
func checkFirstStart(req *api.CreateRequest, allowed []string) (*firstStart, []claudesetup.Warning, error) {
	if err := claudecode.CheckAllowed(req.ClaudeVersion, allowed); err != nil {
		return nil, nil, err
	}
	p := &firstStart{Prompt: req.Prompt}
	if p.Prompt != "" {
		if err := firstprompt.Check(string(p.Prompt)); err != nil {
			return nil, nil, err
		}
	}
	if g := req.GitIdentity; g != nil && !g.IsZero() {
		if err := g.Check(); err != nil {
			return nil, nil, err
		}
		p.Git = g
	}
	var dropped []claudesetup.Warning
	if b := req.ClaudeSetup; !b.IsZero() {
		ws, err := claudesetup.Check(b)
		if err != nil {
			return nil, nil, err
		}
		dropped = ws
		p.Claude = b
	}
	if p.Prompt == "" && p.Git == nil && p.Claude == nil {
		return nil, dropped, nil
	}
	return p, dropped, nil
}

// firstStartFile is where a session's firstStart waits.
func (r *Runner) firstStartFile(id string) string {
	return filepath.Join(r.opts.StateDir, "session-setup", id+".json")
}

// saveFirstStart keeps p for the session's first start; nil keeps nothing.
func (r *Runner) saveFirstStart(id string, p *firstStart) error {
	if p == nil {
		return nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	f := r.firstStartFile(id)
	if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(f, b, 0o600)
}

// pendingFirstStart returns what waits for s's first start: nil once
// claude has started in the session, or if nothing waits. A file that
// cannot be read or parsed is logged and left for the session's removal:
// the session still starts, without it.
func (r *Runner) pendingFirstStart(s *session.Session) *firstStart {
	if s.Started {
		return nil
	}
	b, err := os.ReadFile(r.firstStartFile(s.ID))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var p firstStart
	if err == nil {
		err = json.Unmarshal(b, &p)
	}
	if err == nil && p.Claude != nil {
		_, err = claudesetup.Check(p.Claude)
	}
	if err != nil {
		r.log.Warn("session setup for the first start unreadable; starting without it", logkey.Session, s.ID, logkey.Error, err)
		return nil
	}
	return &p
}

// dropFirstStart forgets a session's firstStart (done, or the session removed).
func (r *Runner) dropFirstStart(id string) error {
	if err := os.Remove(r.firstStartFile(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// mergeConfig lays the user's settings and MCP servers over what launch
// read of the box's .claude.json and settings.json (out, the two split at
// sep), before paddock's seeding (whose keys win); it returns them in the
// same form. Nil p changes nothing.
func (p *firstStart) mergeConfig(out string, sep int) (string, int) {
	if p == nil || p.Claude == nil {
		return out, sep
	}
	cj := claudesetup.MergeClaudeJSON([]byte(out[:sep]), p.Claude.MCPServers)
	sj := claudesetup.MergeSettings([]byte(out[sep+1:]), p.Claude.Settings)
	return string(cj) + "\x00" + string(sj), len(cj)
}

// files is what p writes into the box, relative to the box user's home:
// the Claude setup's files, ~/.gitconfig and the prompt file.
func (p *firstStart) files() ([]boxfiles.File, error) {
	var out []boxfiles.File
	if p.Claude != nil {
		out = append(out, claudesetup.Plan(p.Claude, claudecode.ConfigDirName, path.Join(sandbox.HomeDir, claudecode.ConfigDirName))...)
	}
	if p.Git != nil {
		b, err := p.Git.Render()
		if err != nil {
			return nil, err
		}
		out = append(out, boxfiles.File{Path: ".gitconfig", Mode: 0o644, Data: b})
	}
	if p.Prompt != "" {
		out = append(out, boxfiles.File{Path: firstprompt.BoxPath, Mode: 0o600, Data: []byte(p.Prompt)})
	}
	return out, nil
}

// write puts p's files into the box as the box user (`paddock guest
// unpack`, a tar stream on stdin). Nil p writes nothing.
func (p *firstStart) write(link *Link) error {
	if p == nil {
		return nil
	}
	files, err := p.files()
	if err != nil || len(files) == 0 {
		return err
	}
	tar, err := boxfiles.Pack(files)
	if err != nil {
		return err
	}
	out, code, err := runIn(link.Client, []string{"PATH=/opt/paddock/bin:/usr/local/bin:/usr/bin:/bin"}, tar, "paddock", "guest", "unpack", sandbox.HomeDir)
	if err != nil || code != 0 {
		return fmt.Errorf("write the session's setup into the box (paddock guest unpack; a docker image older than this paddock lacks it: paddock image build): exit %d: %s %v: %w",
			code, strings.TrimSpace(out), err, errdefs.ErrUnavailable)
	}
	return nil
}

// claudeArgv is claude's command line, wrapped to start with the prompt
// when p has one (firstprompt.Wrap).
func (p *firstStart) claudeArgv(argv []string) []string {
	if p == nil || p.Prompt == "" {
		return argv
	}
	return firstprompt.Wrap(argv, path.Join(sandbox.HomeDir, firstprompt.BoxPath))
}
