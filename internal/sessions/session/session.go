// Package session is the pure model of a session: its record, its states
// and the one guard for transitions. No I/O here; the Runner does that.
//
// States: created → running ⇄ asleep → removed, and failed (with a reason)
// from anywhere but removed. Desired and observed state are kept apart:
// Desired is what the owner asked for, Observed what the Runner last saw,
// so a restarted Runner can tell "should run but its box is gone" from
// "asleep on purpose".
package session

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/credentials/service"
	"github.com/paddockhq/paddock/internal/sessions/activity"
	"github.com/paddockhq/paddock/internal/sessions/limits"
)

// State of a session.
type State string

// States.
const (
	Created State = "created"
	Running State = "running"
	Asleep  State = "asleep"
	Removed State = "removed"
	Failed  State = "failed"
)

// Op is an operation on a session.
type Op string

// Operations.
const (
	OpStart  Op = "start"
	OpSleep  Op = "sleep"
	OpWake   Op = "wake"
	OpRemove Op = "remove"
	OpSet    Op = "set"
	OpAttach Op = "attach"
	OpExec   Op = "exec"
	// Access-only operations (Need): no state transition.
	OpView    Op = "view"
	OpObserve Op = "observe"
	OpDrive   Op = "drive"
	OpShare   Op = "share"
	// OpExport writes the session out (paddock session export): its
	// conversation comes along, so it needs an operator.
	OpExport Op = "export"
	// OpDiff shows a clone session's change against its base; OpFetch
	// brings its branch into the host repository (paddock diff, fetch);
	// OpMerge merges it into a branch of the owner's, whose working tree
	// it writes: the owner's alone (paddock merge).
	OpDiff  Op = "diff"
	OpFetch Op = "fetch"
	OpMerge Op = "merge"
	// OpMessage types a message into claude's prompt, as a person at its
	// terminal would (paddock send): a driver's right.
	OpMessage Op = "message"
	// OpPR pushes the session's branch with its owner's service
	// credential and opens a pull request (paddock pr): the owner's.
	OpPR Op = "pr"
	// OpPort publishes a box port on the host's loopback, or takes one
	// back (paddock port): whatever the box serves there becomes
	// reachable by every account on the host, so an operator's right.
	OpPort Op = "port"
	// OpPreview opens a published port's web preview through the web
	// page's login: it acts on the box's app as a person at its
	// terminal could, so a driver's right.
	OpPreview Op = "preview"
)

// allowed lists, per operation, the observed states it may start from.
var allowed = map[Op][]State{
	OpStart:   {Created, Failed},
	OpSleep:   {Running, Failed},
	OpWake:    {Asleep, Failed, Created},
	OpRemove:  {Created, Running, Asleep, Failed},
	OpSet:     {Running, Asleep},
	OpAttach:  {Running},
	OpExec:    {Running},
	OpShare:   {Created, Running, Asleep, Failed},
	OpExport:  {Created, Running, Asleep, Failed},
	OpDiff:    {Running},
	OpFetch:   {Running},
	OpMerge:   {Running},
	OpMessage: {Running},
	OpPR:      {Running},
	OpPort:    {Created, Running, Asleep, Failed},
	OpPreview: {Running},
}

// Check is the one guard for transitions. Its error reads
// `cannot wake session "x": it is removed` and wraps errdefs.ErrConflict.
func Check(op Op, name string, cur State) error {
	for _, s := range allowed[op] {
		if s == cur {
			return nil
		}
	}
	hint := ""
	switch {
	case cur == Asleep && (op == OpAttach || op == OpExec || op == OpSleep || op == OpDiff || op == OpFetch || op == OpMerge || op == OpMessage || op == OpPR):
		hint = fmt.Sprintf("; wake it first: paddock wake %s", name)
	case cur == Running && (op == OpWake || op == OpStart):
		hint = fmt.Sprintf("; it already runs: paddock attach %s", name)
	case cur == Removed:
		hint = "; create a new one with paddock run"
	}
	return fmt.Errorf("cannot %s session %q: it is %s%s: %w", op, name, cur, hint, errdefs.ErrConflict)
}

// CredentialMode says how the box authenticates.
type CredentialMode string

// Credential modes.
const (
	// ModeProxy: the box holds a session token; the Runner's proxy holds the credential.
	ModeProxy CredentialMode = "proxy"
	// ModeDirect: the owner's setup token goes into the box's environment.
	ModeDirect CredentialMode = "direct"
)

// Egress postures: offline (no egress proxy at all), anthropic (the API
// only), allowlist (the session's rules).
const (
	EgressOffline   = "offline"
	EgressAnthropic = "anthropic"
	EgressAllowlist = "allowlist"
)

// Session is the stored record.
type Session struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Backend string `json:"backend"`
	BoxID   string `json:"box_id,omitempty"`

	Desired  State  `json:"desired"`
	Observed State  `json:"observed"`
	Reason   string `json:"reason,omitempty"`

	CredentialMode CredentialMode `json:"credential_mode"`
	CredentialKind string         `json:"credential_kind,omitempty"`
	Egress         string         `json:"egress"`
	// EgressAllow and EgressDeny are the session's rules (allowlist posture).
	EgressAllow []string `json:"egress_allow,omitempty"`
	EgressDeny  []string `json:"egress_deny,omitempty"`
	// EgressAsk holds a connection no rule decides for a person's answer
	// (allowlist posture).
	EgressAsk bool `json:"egress_ask,omitempty"`
	// EgressPolicies are the named policies of the Runner's config
	// attached to the session (their rules are read from the config).
	EgressPolicies []string `json:"egress_policies,omitempty"`
	// EgressApproved are rules people approved while it ran.
	EgressApproved []Approval `json:"egress_approved,omitempty"`
	Workspace      string     `json:"workspace,omitempty"`
	// WorkspaceUID is the uid the workspace belonged to when the session
	// was made; no box of the session mounts it once it is anyone else's.
	WorkspaceUID int `json:"workspace_uid,omitempty"`
	// UnsafeHostCode: the owner asked for the workspace's host code to be
	// writable in the box.
	UnsafeHostCode bool `json:"unsafe_host_code,omitempty"`
	// Clone, when set, makes the session work in a clone of Workspace's
	// repository inside its box, on a branch of its own, instead of in the
	// host's working tree: the host repository is never written by the
	// box, and the work comes back through paddock fetch.
	Clone  *Clone `json:"clone,omitempty"`
	Model  string `json:"model,omitempty"`
	Effort string `json:"effort,omitempty"`
	// Services are the session's grants of its owner's service
	// credentials (paddock run --secret), each with the placeholder the
	// box holds; PushRefs the branches (or NAME/* patterns) it may push
	// besides its own (OwnBranches).
	Services []service.Grant `json:"services,omitempty"`
	PushRefs []string        `json:"push_refs,omitempty"`

	// ClaudeSessionID is Claude Code's conversation id (--session-id, then
	// --resume); Started tells whether claude ran once already.
	ClaudeSessionID string `json:"claude_session_id"`
	Started         bool   `json:"started"`

	// Limits of the credential proxy for this session; zero: none.
	Limits limits.Limits `json:"limits,omitempty"`

	// ClaudeVersion is set when the session runs another version than the pin.
	ClaudeVersion string `json:"claude_version,omitempty"`
	// Runtime is what the session's box runs on, as its engine names it
	// ("runsc", a RuntimeClass); "" for the backend's default.
	Runtime string `json:"runtime,omitempty"`

	// Owner is the person who created the session; Shares the others who
	// may see it, each with a role. A record from before owners has none:
	// it is the Runner's user's (the Runner fills it in when it loads).
	Owner  Person  `json:"owner,omitzero"`
	Shares []Share `json:"shares,omitempty"`
	// YourRole is the caller's role on this session, set per request by
	// the access checks on the copy they answer with; never stored.
	YourRole Role `json:"your_role,omitempty"`
	// Ending is the operation (sleep, rm) that is ending the session's
	// box at this moment: set by the Runner on the copies it answers with
	// while that runs, so that a terminal it cut off can say what is
	// happening before Observed says it; never stored.
	Ending Op `json:"ending,omitempty"`

	// Env are plain variables (KEY=VALUE) for claude and exec in the box,
	// from the project file; never secrets (project.Parse refuses them).
	Env []string `json:"env,omitempty"`
	// Project is what the session took from its workspace's project file
	// (.paddock.toml), nil when it took nothing.
	Project *ProjectUse `json:"project,omitempty"`

	// Ports are the box ports published on the host's loopback (paddock
	// port), open while the box runs: closed when it sleeps, opened again
	// at the same host ports when it wakes.
	Ports []Port `json:"ports,omitempty"`

	// KeepVolume records that `rm --keep-volume` kept the volume.
	KeepVolume bool `json:"keep_volume,omitempty"`

	// Frozen: the box and its processes' memory are kept, the processes
	// stopped (paddock sleep --freeze, or sessions.freeze_after); the
	// session token is suspended. Observed stays running.
	Frozen   bool      `json:"frozen,omitempty"`
	FrozenAt time.Time `json:"frozen_at,omitzero"`

	// Activity is what claude does now (working, waiting, exited), beside
	// the lifecycle state; kept current by the Runner while the session runs.
	Activity activity.Activity `json:"activity,omitzero"`
	// Restart is the restart policy for claude's exits ("" is
	// activity.DefaultPolicy); Restarts counts the automatic restarts.
	Restart  activity.Policy   `json:"restart,omitempty"`
	Restarts activity.Restarts `json:"restarts,omitzero"`

	// LastStart is how the last start of claude in a box (a create, or a
	// wake of a stopped box) spent its time; shown by inspect.
	LastStart StartTimes `json:"last_start,omitzero"`

	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

// ProjectUse is what a session took from its workspace's project file:
// the file's hash (as its owner accepted it), the image made for it, and
// its setup command with the command's outcome.
type ProjectUse struct {
	Sum string `json:"sum"`
	// Image is the id of the image built from the file's recipe
	// (docker), "" for none.
	Image string `json:"image,omitempty"`
	// Setup runs once, in the box, before claude first starts, with the
	// egress rules SetupAllow open while it runs, for at most
	// SetupTimeoutS seconds.
	Setup         string   `json:"setup,omitempty"`
	SetupAllow    []string `json:"setup_allow,omitempty"`
	SetupTimeoutS int      `json:"setup_timeout_s,omitempty"`
	// SetupResult is how it went, once it ran.
	SetupResult *SetupResult `json:"setup_result,omitempty"`
}

// SetupResult is how a project's setup command went: its exit code, how
// long it took, and the end of what it printed (MaxSetupOutput bytes).
type SetupResult struct {
	Exit   int     `json:"exit"`
	MS     float64 `json:"ms"`
	Output string  `json:"output,omitempty"`
}

// MaxSetupOutput bounds the setup output a record keeps: its end.
const MaxSetupOutput = 16 << 10

// Port is one published box port: connections to Host on the host's
// loopback (127.0.0.1) reach Box on the box's loopback, carried by the
// channel (the box has no network interface but loopback).
type Port struct {
	Box int `json:"box"`
	// Host is the host port; 0 in a request asks for a free one, which
	// the record then keeps, so a wake opens the same one.
	Host int `json:"host"`
	// Open says the host port listens now (set on answers, never stored).
	Open bool `json:"open,omitempty"`
	// Error says why it does not, when the box runs (never stored).
	Error string `json:"error,omitempty"`
}

// StartTimes is where one start of a session's claude went, in
// milliseconds, each step as the Runner timed it. Box is the backend's
// own work (creating and starting the box: bwrap, the Docker daemon, a
// pod); the rest is paddock's: the channel to the guest, the egress
// self-test in the box (with the read of Claude Code's config, beside
// it), and seeding that config and starting tmux and claude. Launched is when claude was started, the moment after
// which the time to its prompt is Claude Code's own.
type StartTimes struct {
	Began      time.Time `json:"began"`
	BoxMS      float64   `json:"box_ms"`
	ChannelMS  float64   `json:"channel_ms"`
	SelfTestMS float64   `json:"selftest_ms"`
	ClaudeMS   float64   `json:"claude_ms"`
	Launched   time.Time `json:"launched"`
}

// MS is d in milliseconds, to the microsecond.
func MS(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Live reports whether the session still owns objects (not removed).
func (s *Session) Live() bool { return s.Observed != Removed }

var validName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// idShaped matches what reads as a session id or a prefix of one.
var idShaped = regexp.MustCompile(`^[0-9a-f]+$`)

// ValidName checks a session name. A name made only of hex digits is
// refused: it would read as (a prefix of) a session id, and a session
// named with another's id would take what was meant for that one.
func ValidName(n string) error {
	if !validName.MatchString(n) {
		return fmt.Errorf("session name %q: use lowercase letters, digits, '-', '_' and '.', at most 63, starting with a letter or digit: %w", n, errdefs.ErrInvalid)
	}
	if idShaped.MatchString(n) {
		return fmt.Errorf("session name %q is made only of hex digits and would read as a session id; add a letter from g to z or a '-': %w", n, errdefs.ErrInvalid)
	}
	return nil
}

// validBranch is what paddock takes as a branch name: git's own rules
// (git check-ref-format --branch) and stricter, so that no name reads as
// an option, a path out, a revision expression or a lock file.
var validBranch = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_./-]{0,199}$`)

// ValidBranch checks a branch name (paddock run --clone --branch).
func ValidBranch(b string) error {
	bad := !validBranch.MatchString(b) || strings.Contains(b, "..") || strings.Contains(b, "//") ||
		strings.Contains(b, "/.") || strings.HasSuffix(b, "/") || strings.HasSuffix(b, ".") ||
		strings.HasSuffix(b, ".lock") || strings.Contains(b, ".lock/") || b == "HEAD"
	if bad {
		return fmt.Errorf("branch %q: use letters, digits, '_', '-', '.' and '/', at most 200, starting with a letter, digit or '_', with no '..', '//', '/.' or a trailing '/', '.' or '.lock': %w", b, errdefs.ErrInvalid)
	}
	return nil
}

var validModel = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:\[\]-]{0,99}$`)

// ValidModel checks a model name (passed to claude --model).
func ValidModel(m string) error {
	if m != "" && !validModel.MatchString(m) {
		return fmt.Errorf("model %q is not a model name: %w", m, errdefs.ErrInvalid)
	}
	return nil
}

// Efforts lists the accepted --effort values.
var Efforts = []string{"low", "medium", "high", "xhigh", "max"}

// ValidEffort checks an effort level.
func ValidEffort(e string) error {
	if e == "" {
		return nil
	}
	for _, x := range Efforts {
		if e == x {
			return nil
		}
	}
	return fmt.Errorf("effort %q is not one of %s: %w", e, strings.Join(Efforts, ", "), errdefs.ErrInvalid)
}

// NewID returns a session id: 12 lowercase hex digits.
func NewID() (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// NewUUID returns a random (version 4) UUID for Claude Code's session id.
func NewUUID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], nil
}

var adjectives = []string{"amber", "brisk", "calm", "deft", "eager", "fair", "glad", "hardy", "keen", "lucid", "merry", "noble", "plucky", "quiet", "rapid", "sly", "tidy", "vivid", "witty", "zesty"}
var animals = []string{"otter", "heron", "lynx", "marten", "ibex", "finch", "badger", "gecko", "kestrel", "stoat", "tapir", "wren", "yak", "zebu", "pika", "newt", "orca", "puffin", "quokka", "robin"}

// NewName returns a friendly random name like "calm-otter".
func NewName() string {
	var b [2]byte
	_, _ = rand.Read(b[:])
	return adjectives[int(b[0])%len(adjectives)] + "-" + animals[int(b[1])%len(animals)]
}

// Resolve finds the live session whose id is ref, else the one live
// session whose name equals ref, else the one whose id starts with ref.
// Removed sessions are found only by full id or name when no live one
// matches (so their errors can say "it is removed"). An exact id always
// wins: a call made with a session's id reaches that session, whatever
// another is named.
func Resolve(all []Session, ref string) (Session, error) {
	if ref == "" {
		return Session{}, fmt.Errorf("no session named: %w", errdefs.ErrInvalid)
	}
	var byName, byPrefix, dead []Session
	for _, s := range all {
		switch {
		case s.ID == ref && s.Live():
			return s, nil
		case s.Name == ref && s.Live():
			byName = append(byName, s)
		case strings.HasPrefix(s.ID, ref) && s.Live():
			byPrefix = append(byPrefix, s)
		case !s.Live() && (s.Name == ref || s.ID == ref):
			dead = append(dead, s)
		}
	}
	switch {
	case len(byName) == 1:
		return byName[0], nil
	case len(byPrefix) == 1:
		return byPrefix[0], nil
	case len(byPrefix) > 1:
		return Session{}, fmt.Errorf("%q matches %d sessions; give more of the id or the name: %w", ref, len(byPrefix), errdefs.ErrInvalid)
	case len(dead) > 0:
		latest := dead[0]
		for _, d := range dead {
			if d.Updated.After(latest.Updated) {
				latest = d
			}
		}
		return latest, nil
	}
	return Session{}, fmt.Errorf("no session %q (see paddock ls): %w", ref, errdefs.ErrNotFound)
}

// Person names a host user in a session record.
type Person struct {
	UID  uint32 `json:"uid"`
	Name string `json:"name"`
}

// Share gives a user a role on a session.
type Share struct {
	UID  uint32 `json:"uid"`
	Name string `json:"name"`
	Role Role   `json:"role"`
}

// Role is what a person may do with a session. Each role includes the
// ones before it: observer < driver < operator < owner; admin is above
// all, on every session.
type Role string

// Roles.
const (
	RoleNone     Role = ""
	RoleObserver Role = "observer"
	RoleDriver   Role = "driver"
	RoleOperator Role = "operator"
	RoleOwner    Role = "owner"
	RoleAdmin    Role = "admin"
)

var roleRank = map[Role]int{RoleNone: 0, RoleObserver: 1, RoleDriver: 2, RoleOperator: 3, RoleOwner: 4, RoleAdmin: 5}

// AtLeast reports whether r includes min.
func (r Role) AtLeast(min Role) bool {
	a, ok := roleRank[r]
	return ok && a >= roleRank[min]
}

// ParseShareRole checks a role that may be shared: observer, driver or
// operator.
func ParseShareRole(s string) (Role, error) {
	switch r := Role(s); r {
	case RoleObserver, RoleDriver, RoleOperator:
		return r, nil
	}
	return "", fmt.Errorf("role %q is not observer, driver or operator: %w", s, errdefs.ErrInvalid)
}

// RoleOf is uid's own role on s (owner, a shared role, or none); admins
// are decided by the caller, who knows them.
func (s *Session) RoleOf(uid uint32) Role {
	if s.Owner.UID == uid {
		return RoleOwner
	}
	for _, sh := range s.Shares {
		if sh.UID == uid {
			return sh.Role
		}
	}
	return RoleNone
}

// Need is the least role each operation asks for. Viewing the record and
// its decisions (OpView) and watching the terminal ask for observer;
// typing (OpDrive) for driver; changing the session for operator; sharing
// it for owner.
var Need = map[Op]Role{
	OpView: RoleObserver, OpObserve: RoleObserver, OpDrive: RoleDriver,
	OpSleep: RoleOperator, OpWake: RoleOperator, OpSet: RoleOperator, OpExec: RoleOperator, OpRemove: RoleOperator,
	OpShare: RoleOwner, OpExport: RoleOperator,
	OpDiff: RoleObserver, OpFetch: RoleOperator, OpMerge: RoleOwner,
	OpMessage: RoleDriver, OpPR: RoleOwner,
	OpPort: RoleOperator, OpPreview: RoleDriver,
}

// Clone is a clone session's branch: made in the box at its first start
// from Base, the commit From named in the host repository then.
type Clone struct {
	// Branch is the clone's branch (paddock/<name> unless named).
	Branch string `json:"branch"`
	// Base is the commit the branch starts from (a full object id).
	Base string `json:"base"`
	// From is what the creator named for the base ("HEAD" unless given).
	From string `json:"from,omitempty"`

	// What the Runner last saw of the branch (at the end of each turn, a
	// diff, fetch or merge, and before the box sleeps), as of Checked:
	// its commit, how many commits it is beyond Base, and whether the
	// clone had changes not committed.
	Head    string    `json:"head,omitempty"`
	Ahead   int       `json:"ahead,omitempty"`
	Dirty   bool      `json:"dirty,omitempty"`
	Checked time.Time `json:"checked,omitzero"`
	// Fetched is the branch's commit the last fetch brought into the
	// host repository; Merged the one the last merge merged.
	Fetched string `json:"fetched,omitempty"`
	Merged  string `json:"merged,omitempty"`
}

// Unsaved says the branch, as last seen, holds work the host repository
// does not have: commits neither fetched nor merged, or changes not
// committed. A session never seen says nothing.
func (c *Clone) Unsaved() bool {
	return c != nil && (c.Dirty || c.Ahead > 0 && c.Head != c.Fetched && c.Head != c.Merged)
}

// Approval is an egress rule a person approved for a session: until a
// time (zero: for the session's life), by whom.
type Approval struct {
	Rule  string    `json:"rule"`
	Until time.Time `json:"until,omitzero"`
	By    string    `json:"by"`
	At    time.Time `json:"at"`
}

// EgressSummary is the session's egress in one line: its posture and,
// for an allowlist, its rules, policies, ask mode and approvals; then its
// deny rules.
func (s Session) EgressSummary() string {
	parts := []string{s.Egress}
	if s.Egress == EgressAllowlist {
		if len(s.EgressAllow) > 0 {
			parts = append(parts, "allow "+strings.Join(s.EgressAllow, ", "))
		}
		for _, p := range s.EgressPolicies {
			parts = append(parts, "policy "+p)
		}
		if s.EgressAsk {
			parts = append(parts, "ask")
		}
		for _, a := range s.EgressApproved {
			t := "approved " + a.Rule + " by " + a.By
			if !a.Until.IsZero() {
				t += " until " + a.Until.UTC().Format("15:04Z")
			}
			parts = append(parts, t)
		}
	}
	if len(s.EgressDeny) > 0 {
		parts = append(parts, "deny "+strings.Join(s.EgressDeny, ", "))
	}
	return strings.Join(parts, "; ")
}

// OwnBranches are the branches a push with the session's grants may
// update: its clone's branch (paddock/<name> for a session without a
// clone), and PushRefs.
func (s *Session) OwnBranches() []string {
	own := "paddock/" + s.Name
	if s.Clone != nil && s.Clone.Branch != "" {
		own = s.Clone.Branch
	}
	return append([]string{own}, s.PushRefs...)
}
