package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/claudesetup"
	"github.com/paddockhq/paddock/internal/sessions/firstprompt"
	"github.com/paddockhq/paddock/internal/sessions/gitident"
	"github.com/paddockhq/paddock/internal/sessions/portable"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// runSetup is what `paddock run` brings into the box for the session's
// first start, read here as the person who runs it: their Claude Code
// setup, their git identity and the task claude starts with.
type runSetup struct {
	noClaudeConfig bool
	claudeConfig   string
	noGitIdentity  bool
	prompt         string
	promptFile     string
	// promptGiven: --prompt was on the command line, empty or not (an
	// empty one is a mistake to say, not a session without a task).
	promptGiven bool
	// resumeHost is --resume-host: resumeLatest, or a conversation's id.
	resumeHost string
}

// resumeLatest is --resume-host given without an id: the newest
// conversation of the workspace.
const resumeLatest = "latest"

func (rs *runSetup) flags(f *pflag.FlagSet) {
	f.BoolVar(&rs.noClaudeConfig, "no-claude-config", false, "do not bring your Claude Code setup (CLAUDE.md, settings, agents, commands, skills, output styles, plugins, MCP servers) into the box")
	f.StringVar(&rs.claudeConfig, "claude-config", "", "bring the Claude Code setup of this config dir instead of yours (read as CLAUDE_CONFIG_DIR: DIR/.claude.json, or the one beside DIR when DIR is a .claude)")
	f.BoolVar(&rs.noGitIdentity, "no-git-identity", false, "do not give the box your git user.name and user.email")
	f.StringVar(&rs.prompt, "prompt", "", fmt.Sprintf("the task claude starts with: its first message (at most %d KiB; first start only)", firstprompt.MaxBytes>>10))
	f.StringVar(&rs.promptFile, "prompt-file", "", "as --prompt, from a file (- for stdin)")
	f.StringVar(&rs.resumeHost, "resume-host", "", "continue a conversation you had with Claude Code on this host in the workspace (or the current directory): the latest, or the one whose id follows")
	f.Lookup("resume-host").NoOptDefVal = resumeLatest
}

// args checks run's arguments: none, but the id after a bare
// --resume-host (`--resume-host ID`: a flag with an optional value takes
// only `--resume-host=ID` as its own).
func (rs *runSetup) args(cmd *cobra.Command, args []string) error {
	switch {
	case len(args) == 0:
		return nil
	case len(args) == 1 && rs.resumeHost == resumeLatest && cmd.Flags().Changed("resume-host"):
		rs.resumeHost = args[0]
		return nil
	}
	return usageError{fmt.Errorf("run takes no arguments but --resume-host's id; got %q (see `paddock run --help`)", strings.Join(args, " "))}
}

// readResume puts the host conversation --resume-host names into req,
// read here as the person who runs paddock (under sudo: SUDO_USER, whose
// files it must be), never through a symlink, within the caps the Runner
// checks again (portable.ReadHost).
func (rs *runSetup) readResume(req *api.CreateRequest, o IO) error {
	if rs.resumeHost == "" {
		return nil
	}
	id := rs.resumeHost
	if id == resumeLatest {
		id = ""
	} else if err := portable.CheckConversationID(id); err != nil {
		return usageError{fmt.Errorf("--resume-host: %w", err)}
	}
	root := os.Geteuid() == 0
	src, err := claudesetup.Locate(claudesetup.LocateOptions{Env: o.Env, Dir: rs.claudeConfig, Root: root,
		LookupHome: func(name string) (string, error) {
			u, err := user.Lookup(name)
			if err != nil {
				return "", err
			}
			return u.HomeDir, nil
		}})
	if err != nil {
		return fmt.Errorf("--resume-host: %w", err)
	}
	if src.Dir == "" {
		return fmt.Errorf("--resume-host: no home to find Claude Code's conversations in (HOME is not set); give its config dir with --claude-config: %w", errdefs.ErrNotFound)
	}
	uid := -1
	if root && o.getenv("SUDO_USER") != "" && o.getenv("SUDO_USER") != "root" {
		// Run through sudo: the files must be the person's, as if they read them.
		if uid, err = strconv.Atoi(o.getenv("SUDO_UID")); err != nil {
			return fmt.Errorf("--resume-host under sudo: SUDO_UID %q is not a uid: %w", o.getenv("SUDO_UID"), errdefs.ErrInvalid)
		}
	}
	cwd := req.Workspace
	if cwd == "" {
		if cwd, err = os.Getwd(); err != nil {
			return err
		}
	}
	cwds := []string{cwd}
	if real, err := filepath.EvalSymlinks(cwd); err == nil && real != cwd {
		cwds = append([]string{real}, cwds...) // as Claude Code's cwd reads it
	}
	c, warnings, err := portable.ReadHost(portable.HostOptions{ConfigDir: src.Dir, Cwds: cwds, ID: id, UID: uid})
	if err != nil {
		return fmt.Errorf("--resume-host: %w", err)
	}
	for _, w := range warnings {
		fmt.Fprintf(o.Stderr, "resume-host: %s\n", w)
	}
	var n int
	for _, f := range c.Files {
		n += len(f.Data)
	}
	fmt.Fprintf(o.Stderr, "resume-host: continuing conversation %s (%d files, %d KiB) from %s\n", c.ID, len(c.Files), (n+1023)>>10, src.Dir)
	req.Resume = c
	return nil
}

// fill puts what rs brings into req. A Claude setup or git identity that
// cannot be read (broken, huge, unreadable) never stops the session: what
// was left out is printed on o.Stderr, one line each. A bad --prompt or an
// explicit --claude-config that is not a directory is an error.
// stdinTaken says another flag reads stdin already.
func (rs *runSetup) fill(ctx context.Context, req *api.CreateRequest, o IO, stdinTaken bool) error {
	if err := rs.readPrompt(req, o, stdinTaken); err != nil {
		return err
	}
	if err := rs.readResume(req, o); err != nil {
		return err
	}
	if rs.noClaudeConfig && rs.claudeConfig != "" {
		return usageError{errors.New("--no-claude-config and --claude-config: give one")}
	}
	if rs.noClaudeConfig && rs.noGitIdentity {
		return nil
	}
	src, err := claudesetup.Locate(claudesetup.LocateOptions{Env: o.Env, Dir: rs.claudeConfig, Root: os.Geteuid() == 0,
		LookupHome: func(name string) (string, error) {
			u, err := user.Lookup(name)
			if err != nil {
				return "", err
			}
			return u.HomeDir, nil
		}})
	if err != nil {
		if rs.claudeConfig != "" {
			return usageError{err}
		}
		fmt.Fprintf(o.Stderr, "claude setup: not brought: %v\n", err)
		return nil
	}
	if !rs.noClaudeConfig {
		b, ws, err := claudesetup.Collect(src)
		for _, w := range ws {
			fmt.Fprintf(o.Stderr, "claude setup: %s\n", w)
		}
		switch {
		case err != nil:
			fmt.Fprintf(o.Stderr, "claude setup: not brought: %v\n", err)
		case !b.IsZero():
			req.ClaudeSetup = &b
			fmt.Fprintf(o.Stderr, "claude setup: bringing %s from %s\n", b.Summary(), src.Dir)
		}
	}
	if !rs.noGitIdentity && src.Home != "" {
		id, err := gitident.Read(ctx, src.Home, o.Env)
		if err == nil {
			err = id.Check()
		}
		switch {
		case err != nil:
			fmt.Fprintf(o.Stderr, "git identity: not brought: %v\n", err)
		case !id.IsZero():
			req.GitIdentity = &id
		}
	}
	return nil
}

// readPrompt sets req.Prompt from --prompt or --prompt-file.
func (rs *runSetup) readPrompt(req *api.CreateRequest, o IO, stdinTaken bool) error {
	if rs.prompt != "" && rs.promptFile != "" {
		return usageError{errors.New("--prompt and --prompt-file: give one")}
	}
	p := rs.prompt
	if rs.promptFile != "" {
		var r io.Reader
		switch rs.promptFile {
		case "-":
			if stdinTaken {
				return usageError{errors.New("--prompt-file - and another flag both read stdin: give one of them a file")}
			}
			r = o.Stdin
		default:
			f, err := os.Open(rs.promptFile)
			if err != nil {
				return usageError{fmt.Errorf("--prompt-file: %w", err)}
			}
			defer f.Close()
			r = f
		}
		b, err := io.ReadAll(io.LimitReader(r, firstprompt.MaxBytes+1))
		if err != nil {
			return fmt.Errorf("--prompt-file: %w", err)
		}
		p = string(b)
	}
	if p == "" && rs.promptFile == "" && !rs.promptGiven {
		return nil
	}
	if err := firstprompt.Check(p); err != nil {
		return usageError{fmt.Errorf("--prompt: %w", err)}
	}
	req.Prompt = firstprompt.Text(p)
	return nil
}

// readsStdin reports whether --credential-file or a --relay-secret reads stdin.
func readsStdin(credFile string, relaySecrets []string) bool {
	if credFile == "-" {
		return true
	}
	for _, rs := range relaySecrets {
		if _, file, _ := strings.Cut(rs, "="); file == "-" {
			return true
		}
	}
	return false
}
