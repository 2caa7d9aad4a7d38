package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/box/guest"
	"github.com/paddockhq/paddock/internal/box/runtimes"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/sessions/claudecode"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// Tmux: one server per box on its own socket, one session named claude.
const (
	TmuxSocket  = "paddock"
	TmuxSession = "claude"
)

// start starts the box (if needed), links it and starts claude: the first
// time with --session-id, then with --resume.
//
// began is when the start began and created how long creating the box
// took (for a new session; 0 otherwise): s.LastStart counts both.
func (r *Runner) start(ctx context.Context, s *session.Session, be sandbox.Backend, began time.Time, created time.Duration) error {
	t := session.StartTimes{Began: began}
	lap := func(ms *float64) func() {
		t0 := time.Now()
		return func() { *ms = session.MS(time.Since(t0)) }
	}
	done := lap(&t.BoxMS)
	if _, err := be.Start(ctx, s.BoxID); err != nil {
		r.fail(s, "start box: "+err.Error())
		return err
	}
	done()
	if _, err := r.setPolicy(s); err != nil {
		r.fail(s, "egress policy: "+err.Error())
		return err
	}
	r.trackLimits(s)
	done = lap(&t.ChannelMS)
	link, err := r.linkSession(ctx, be, s)
	if err != nil {
		r.fail(s, "connect to box: "+err.Error())
		return err
	}
	done()
	// The self-test must pass before claude may start; reading Claude
	// Code's config, which needs no credential, goes on beside it.
	done = lap(&t.SelfTestMS)
	tested := make(chan error, 1)
	go func() { tested <- r.selfTest(ctx, link, s) }()
	read := readBoxConfig(link)
	if err := <-tested; err != nil {
		link.Close()
		r.fail(s, err.Error())
		_ = be.Stop(ctx, s.BoxID, sandbox.StopOptions{})
		return err
	}
	done()
	done = lap(&t.ClaudeMS)
	if err := setupClone(ctx, be, link, s); err != nil { // a clone session's first start (clone.go)
		link.Close()
		r.fail(s, err.Error())
		return err
	}
	if err := r.runSetup(ctx, s, link); err != nil { // a project's setup, once (projectsetup.go)
		link.Close()
		r.fail(s, err.Error())
		return err
	}
	env, err := r.launchWith(ctx, s, link, read)
	if err != nil {
		link.Close()
		r.fail(s, "start claude: "+err.Error())
		return err
	}
	done()
	t.Launched = time.Now()
	t.BoxMS += session.MS(created)
	r.setLive(s.ID, &live{link: link, env: env})
	again := s.Started // claude ran in this session before: its conversation is resumed if on disk
	s.Started, s.Desired, s.Observed, s.Reason = true, session.Running, session.Running, ""
	s.LastStart = t
	r.log.Info("session running", logkey.Session, s.ID, "resume", again,
		"box_ms", t.BoxMS, "channel_ms", t.ChannelMS, "selftest_ms", t.SelfTestMS, "claude_ms", t.ClaudeMS)
	return r.save(s)
}

// credentialEnv picks what claude authenticates with: a fresh session
// token (proxy) or the owner's setup token (direct).
func (r *Runner) credentialEnv(s *session.Session) (varName, value string, err error) {
	cred, err := r.credentialOf(s.ID)
	if err != nil {
		return "", "", err
	}
	// An expired credential fails here, clearly, not as a stream of 401s.
	if err := cred.Usable(time.Now()); err != nil {
		return "", "", err
	}
	if s.CredentialMode == session.ModeDirect {
		// Checked at every start, not only at create: the person may have
		// removed their own credential since, leaving only a lent one.
		if owner := r.ownerOf(s.ID); r.lent(owner, cred) {
			return "", "", errLentDirect(owner)
		}
		if cred.Kind != credential.KindOAuth {
			return "", "", fmt.Errorf("direct mode needs an oauth setup token; the owner's credential is %s: %w", cred.Kind, errdefs.ErrInvalid)
		}
		return cred.Kind.EnvVar(), cred.Secret.Reveal(), nil
	}
	tok, err := r.tokens.Issue(s.ID, cred.Kind)
	if err != nil {
		return "", "", err
	}
	s.CredentialKind = string(cred.Kind)
	return cred.Kind.EnvVar(), tok.Reveal(), nil
}

// Claude Code's config directory and its two files, in every box.
var (
	boxConfigDir    = sandbox.HomeDir + "/" + claudecode.ConfigDirName
	boxClaudeJSON   = boxConfigDir + "/.claude.json"
	boxSettingsJSON = boxConfigDir + "/settings.json"
)

// boxConfig is what readBoxConfig read: both config files, NUL-separated.
type boxConfig struct {
	out string
	sep int // the last NUL
	err error
}

// readBoxConfig reads both of Claude Code's config files in one exec,
// NUL-separated (split at the last NUL: valid JSON holds none). It reads
// only regular files, and at most configMax+1 bytes of each, since the
// box writes them: a FIFO or a device there reads as no file and is
// replaced.
func readBoxConfig(link *Link) boxConfig {
	out, code, err := runIn(link.Client, []string{"PATH=/usr/bin:/bin"}, nil, "sh", "-c", readConfigScript,
		"sh", boxClaudeJSON, boxSettingsJSON, strconv.Itoa(configMax+1))
	sep := strings.LastIndexByte(out, 0)
	if err != nil || code != 0 || sep < 0 {
		return boxConfig{err: fmt.Errorf("read Claude Code's config in the box: exit %d: %v", code, err)}
	}
	return boxConfig{out: out, sep: sep}
}

// launch seeds Claude Code's config and (re)starts tmux with claude.
func (r *Runner) launch(ctx context.Context, s *session.Session, link *Link) ([]string, error) {
	return r.launchWith(ctx, s, link, readBoxConfig(link))
}

// launchWith is launch with the config already read (start reads it
// beside the self-test). Its steps: the credential, the config files
// seeded (seedConfig), claude's environment (launchOptions), the first
// start's files, the config files written (putConfig), then one exec that
// (re)starts tmux with claude (startTmux).
func (r *Runner) launchWith(ctx context.Context, s *session.Session, link *Link, read boxConfig) ([]string, error) {
	if read.err != nil {
		return nil, read.err
	}
	varName, value, err := r.credentialEnv(s)
	if err != nil {
		return nil, err
	}
	// At the first start only: the creator's settings and MCP servers,
	// laid over what was read, so the seeding below (paddock's keys) wins.
	first := r.pendingFirstStart(s)
	approve := ""
	if varName == credential.KindAPIKey.EnvVar() {
		approve = value
	}
	cf, err := r.seedConfig(s, read, first, approve)
	if err != nil {
		return nil, err
	}
	o := r.launchOptions(s, varName, value)
	env := claudecode.Env(o)
	if err := first.write(link); err != nil { // the setup's files, ~/.gitconfig, the prompt
		return nil, err
	}
	stdin, err := r.putConfig(link, s, &cf)
	if err != nil {
		return nil, err
	}
	if err := startTmux(link, env, stdin, s, cf, tmuxArgv(first, o)); err != nil {
		return nil, err
	}
	if first != nil {
		if err := r.dropFirstStart(s.ID); err != nil {
			r.log.Warn("could not remove the session's first-start setup", logkey.Session, s.ID, logkey.Error, err)
		}
	}
	r.claudeStarted(s, first != nil && first.Prompt != "") // activity: starting, until its SessionStart hook or its first prompt (activity.go)
	return env, nil
}

// configFiles is what launch does with Claude Code's two config files in
// the box: the paths kept aside as <name>.invalid, the paths written, and
// what is written to each (in write's order).
type configFiles struct {
	aside, write []string
	seeded       [][]byte
}

// seedConfig seeds the two config files launch read, with first's setup
// laid over them, and says what becomes of each.
func (r *Runner) seedConfig(s *session.Session, read boxConfig, first *firstStart, approve string) (configFiles, error) {
	claudeJSON, settingsJSON := boxClaudeJSON, boxSettingsJSON
	out, sep := read.out, read.sep
	out, sep = first.mergeConfig(out, sep)
	cj, cjKept, err := claudecode.SeedClaudeJSON([]byte(out[:sep]), sandbox.WorkspaceDir, approve)
	if err != nil {
		return configFiles{}, fmt.Errorf("%s: %w", claudeJSON, err)
	}
	sj, sjKept, err := claudecode.SeedSettings([]byte(out[sep+1:]))
	if err != nil {
		return configFiles{}, fmt.Errorf("%s: %w", settingsJSON, err)
	}
	// What becomes of each file (the guest's put does it, or, with an
	// older guest, the start script): a file over configMax (Claude Code's
	// own .claude.json can grow to megabytes) is left as it is; one that
	// is not a JSON object (a box killed while Claude Code wrote it, or an
	// agent's doing) is kept aside as <name>.invalid; the seeded ones are
	// written (for the script, NUL-separated on stdin). Every path here is
	// under sandbox.HomeDir: no space in it.
	var cf configFiles
	for _, f := range []struct {
		path, read string
		seeded     []byte
		kept       bool
	}{{claudeJSON, out[:sep], cj, cjKept}, {settingsJSON, out[sep+1:], sj, sjKept}} {
		switch {
		case len(f.read) > configMax:
			r.log.Warn("Claude Code's config in the box is too large to seed; left as it is",
				logkey.Session, s.ID, "file", f.path, "limit_bytes", configMax)
			continue
		case !f.kept:
			r.log.Warn("Claude Code's config in the box was not a JSON object; kept aside as .invalid and written anew",
				logkey.Session, s.ID, "file", f.path)
			cf.aside = append(cf.aside, f.path)
		}
		cf.write = append(cf.write, f.path)
		cf.seeded = append(cf.seeded, f.seeded)
	}
	return cf, nil
}

// GVisorGitConfig is the git setting of claude's environment in a box on
// gVisor (launchOptions): stat checks of size and mtime only, and new
// objects renamed into place, not hard-linked (gVisor's gofer keeps a host
// descriptor for every hard-linked file while the box runs: git add of
// 50,000 files, linking each object, ran out of descriptors).
const GVisorGitConfig = "GIT_CONFIG_PARAMETERS='core.checkstat'='minimal' 'core.createobject'='rename'"

// launchOptions is how claude starts in s's box: its credential (varName
// set to value), its base URL and proxies, and what direct mode adds.
func (r *Runner) launchOptions(s *session.Session, varName, value string) claudecode.LaunchOptions {
	o := claudecode.LaunchOptions{Home: sandbox.HomeDir, CredentialVar: varName, Credential: value,
		SessionID: s.ClaudeSessionID, Model: s.Model, Effort: s.Effort} // the script turns --session-id into --resume
	if s.CredentialMode == session.ModeProxy {
		o.BaseURL = "http://" + BoxAPIAddr
	}
	// The plan of the owner's OAuth token, so the box's Claude Code picks
	// the model defaults of the owner's subscription.
	if varName == credential.KindOAuth.EnvVar() {
		if cred, err := r.credentialOf(s.ID); err == nil {
			o.Extra = append(o.Extra, cred.Plan.Env()...)
		}
	}
	{
		// Every box has the egress proxy in its environment, offline ones
		// too (it refuses everything there, and says so): a session's
		// egress can then change while claude runs, without a restart.
		p := "http://" + BoxEgressAddr
		o.Extra = append(o.Extra, "HTTPS_PROXY="+p, "HTTP_PROXY="+p, "https_proxy="+p, "http_proxy="+p,
			"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost")
	}
	o.Extra = append(o.Extra, r.serviceEnvOf(s)...)
	o.Extra = append(o.Extra, s.Env...) // the project file's (project.Parse refuses paddock's names)
	if runtimes.KindOf(s.Runtime, "") == runtimes.GVisor {
		// gVisor gives files inode numbers of its own, new in every box:
		// git's default stat check would re-hash the whole worktree on the
		// first status of each box. Size and mtime only, and no hard links
		// (GVisorGitConfig); not in the repository's config, which the
		// host's git reads too.
		o.Extra = append(o.Extra, GVisorGitConfig)
	}
	if r.direct(s) && r.opts.Config.Anthropic.UsageViewOn() {
		// /status usage is asked for only without the quiet switch; what
		// else the CLI then asks the API host for is refused on the direct
		// path, and other hosts follow the session's egress.
		o.NonessentialTraffic = true
	}
	if r.direct(s) {
		// The CA certificate (never its key), trusted for DirectHost alone.
		// The base URL counts as first party, so the CLI asks the API host
		// for what it asks it only then (remote managed settings); those
		// requests come to the Runner (DIRECT-REQUESTS.md).
		// Fast mode without its status request (which the quiet switch
		// blocks in the box anyway): the API itself refuses it to an
		// organization that does not allow it, and the CLI then turns it off.
		o.Extra = append(o.Extra, "NODE_EXTRA_CA_CERTS="+BoxCAFile, "_CLAUDE_CODE_ASSUME_FIRST_PARTY_BASE_URL=1",
			"CLAUDE_CODE_SKIP_FAST_MODE_ORG_CHECK=1",
			// The owner's claude.ai connectors are not the agent's to list.
			"ENABLE_CLAUDEAI_MCP_SERVERS=false")
	}
	return o
}

// putConfig has the guest write the seeded files (and the CA certificate)
// itself, after keeping aside the ones that were not JSON: no process in
// the box for it; cf is then emptied. An older guest cannot: the start
// script does it, with `paddock guest put`, from the stdin returned.
func (r *Runner) putConfig(link *Link, s *session.Session, cf *configFiles) (stdin []byte, err error) {
	files := make([]channel.PutFile, 0, len(cf.write)+1)
	for i, p := range cf.write {
		files = append(files, channel.PutFile{Path: p, Data: cf.seeded[i]})
	}
	if r.direct(s) {
		files = append(files, channel.PutFile{Path: BoxCAFile, Data: r.ca.PEM})
	}
	svcFiles, err := r.serviceFiles(s)
	if err != nil {
		return nil, fmt.Errorf("the session's service credentials: %w", err)
	}
	files = append(files, svcFiles...)
	switch err := link.Client.Put(files, cf.aside, time.Now().Add(runTimeout)); {
	case errors.Is(err, channel.ErrUnknownType):
		stdin = bytes.Join(cf.seeded, []byte{0}) // for the script's `paddock guest put`
		if r.direct(s) {
			env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + sandbox.HomeDir}
			if out, code, err := runIn(link.Client, env, r.ca.PEM, "sh", "-c", writeFileScript, "sh", BoxCAFile); err != nil || code != 0 {
				return nil, fmt.Errorf("give the box the Runner's CA certificate: exit %d: %s %v", code, strings.TrimSpace(out), err)
			}
		}
		for _, f := range svcFiles {
			env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + sandbox.HomeDir}
			if out, code, err := runIn(link.Client, env, f.Data, "sh", "-c", writeFileScript, "sh", f.Path); err != nil || code != 0 {
				return nil, fmt.Errorf("give the box %s: exit %d: %s %v", f.Path, code, strings.TrimSpace(out), err)
			}
		}
	case err != nil:
		return nil, fmt.Errorf("write Claude Code's config in the box: %w", err)
	default:
		cf.aside, cf.write = nil, nil
	}
	return stdin, nil
}

// tmuxArgv is the command line that starts tmux's server, with claude
// (wrapped by exitWrap, and by first's prompt) in its one session.
func tmuxArgv(first *firstStart, o claudecode.LaunchOptions) []string {
	return append([]string{"tmux", "-L", TmuxSocket, "-f", "/dev/null",
		"start-server", ";",
		"set-option", "-g", "remain-on-exit", "on", ";",
		"set-option", "-g", "status", "off", ";",
		"set-option", "-g", "history-limit", "50000", ";",
		"set-option", "-g", "focus-events", "on", ";",
		// claude's end, reported to the guest; the Runner then asks tmux how (activity.go)
		"set-hook", "-g", "pane-died", "run-shell -b 'paddock guest hook pane-died'", ";",
		"new-session", "-d", "-s", TmuxSession, "-x", "200", "-y", "50", "-c", sandbox.WorkspaceDir, "--"},
		exitWrap(first.claudeArgv(claudecode.Args(o)))...)
}

// startTmux runs argv (tmuxArgv) in the box through scripts/launch.sh,
// in a second exec that writes both files atomically, replaces any
// running tmux whole (its server holds the old environment) and starts
// claude. The files come on stdin,
// NUL-separated; the credential only ever travels in this process's
// environment, which tmux keeps in memory.
//
// Only then, with any earlier claude gone, does it look at the
// transcript: a conversation with a user message in it is resumed
// (--session-id becomes --resume; claude refuses to start again with
// the id of an existing conversation). One without — what a box killed
// before claude wrote one leaves — cannot be resumed and would block
// --session-id: it is kept aside, and the conversation starts anew.
func startTmux(link *Link, env []string, stdin []byte, s *session.Session, cf configFiles, argv []string) error {
	cfgDir := boxConfigDir
	transcript := claudecode.TranscriptPath(sandbox.HomeDir, sandbox.WorkspaceDir, s.ClaudeSessionID)
	aside, write := cf.aside, cf.write
	tmuxSock := fmt.Sprintf("/tmp/tmux-%d/%s", sandbox.BoxUID, TmuxSocket)
	if out, code, err := runIn(link.Client, env, stdin, "sh", append([]string{"-c", launchScript, "sh", cfgDir, transcript, strings.Join(aside, " "), strings.Join(write, " "),
		TmuxSocket, tmuxSock, claudeExitFile}, argv...)...); err != nil || code != 0 {
		return fmt.Errorf("start claude in tmux: exit %d: %s %v", code, strings.TrimSpace(out), err)
	}
	return nil
}

// selfTest has the box's guest run the egress self-test before claude
// starts, in its own process: the session fails, with the failed checks as
// its reason, if the posture leaks. An older guest, which cannot, runs
// `paddock guest selftest` as a process instead. A box on a pod network
// (Capabilities.PodNetwork) proves instead that its interface reaches
// nothing, in a process.
func (r *Runner) selfTest(ctx context.Context, link *Link, s *session.Session) error {
	args := []string{"guest", "selftest", "--proxy", BoxEgressAddr}
	be, err := r.backend(ctx, s.Backend)
	if err != nil {
		return err
	}
	pod := be.Capabilities(ctx).PodNetwork
	var out string
	code := 0
	if !pod {
		out, err = link.Client.SelfTest(BoxEgressAddr, time.Now().Add(runTimeout))
		if err == nil && !guest.Passed(out) {
			code = 1
		}
	}
	if pod || errors.Is(err, channel.ErrUnknownType) {
		if pod {
			args = append(args, "--pod-network")
		}
		out, code, err = runIn(link.Client, []string{"PATH=/opt/paddock/bin:/usr/local/bin:/usr/bin:/bin"}, nil, "paddock", args...)
	}
	if err != nil {
		return fmt.Errorf("egress self-test: %w", err)
	}
	if code != 0 {
		return fmt.Errorf("egress self-test failed in the box, claude not started: %s", guest.Failed(out))
	}
	return nil
}

// configMax is the largest Claude Code config file in a box that launch
// reads and seeds (two of them fit in runMaxOutput).
const configMax = 16 << 20

// readTmuxEnv reads claude's environment back from the tmux server's
// global environment (the Runner keeps no token in its store).
func readTmuxEnv(cl *channel.Client) ([]string, error) {
	out, code, err := runIn(cl, []string{"PATH=/usr/bin:/bin"}, nil, "tmux", "-L", TmuxSocket, "show-environment", "-g")
	if err != nil || code != 0 {
		return nil, fmt.Errorf("tmux show-environment: exit %d: %v", code, err)
	}
	var env []string
	for _, l := range strings.Split(out, "\n") {
		if l == "" || strings.HasPrefix(l, "-") || !strings.Contains(l, "=") {
			continue
		}
		env = append(env, l)
	}
	if len(env) == 0 {
		return nil, errors.New("tmux has no environment")
	}
	return env, nil
}
