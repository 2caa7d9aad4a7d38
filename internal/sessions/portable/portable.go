// Package portable is paddock's portable session file: what `paddock
// session export` writes and `paddock session import` reads, so that a
// session's conversation moves to another Runner or backend and resumes
// there (docs/PORTABLE.md).
//
// The file is a gzip-compressed tar stream of regular files, in this order:
//
//	manifest.json     Manifest: format, version, the conversation's id, and
//	                  every other entry with its size and SHA-256
//	session.json      Settings: model, effort, egress, limits, restart
//	                  policy, activity (never an owner, share, id or token)
//	decisions.jsonl   the session's decision log, one decisionlog.Entry a
//	                  line (its session field left out); optional
//	claude/<path>     Claude Code's state, relative to the box's ~/.claude:
//	                  transcripts (subagents' too), todos, plans, file
//	                  history, the prompt history, settings.json and
//	                  .claude.json, the setup that came with the session
//
// Read is a parser of untrusted bytes. It holds at most Limits of data in
// memory, checks each entry as it streams in (refusing a file at the
// first byte that breaks a rule: a line too long, more lines or decision
// log entries than Limits allow, a line that is not JSON), reads nothing
// it does not check, and returns an error for
// anything out of rule: a path that is not clean and relative, or names
// what the format does not carry; a symlink, hard link, device, directory
// or any other entry type; an entry twice, over its cap or missing; a
// manifest whose sizes or hashes do not match; a wrong format or version;
// a cut or damaged gzip stream; a transcript that is not JSON lines; a
// credential file. Nothing is written by Read: a caller that acts only on
// its success writes nothing for a refused file.
//
// No credential is ever in a file: Write and Read both drop
// .credentials.json, the keys of .claude.json and settings.json that hold
// or fetch one, and replace every credential-shaped string (a paddock
// session token, an Anthropic key or token) with secret.Redacted.
package portable

import (
	"fmt"
	"regexp"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/sessions/activity"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
	"github.com/paddockhq/paddock/internal/sessions/limits"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// Format names the file kind in its manifest.
const Format = "paddock-session"

// Version is the format version this paddock writes and the only one it
// reads. Raise it with every change an older reader would misread.
const Version = 1

// Entry names in the tar stream.
const (
	ManifestName  = "manifest.json"
	SettingsName  = "session.json"
	DecisionsName = "decisions.jsonl"
	// ClaudePrefix starts every entry of Claude Code's state; the rest of
	// the name is the path under the box's ~/.claude.
	ClaudePrefix = "claude/"
)

// Limits bound what Read accepts and holds in memory.
type Limits struct {
	// MaxEntry is the most bytes of one entry's data.
	MaxEntry int64
	// MaxTotal is the most bytes of all entries' data together.
	MaxTotal int64
	// MaxEntries is the most entries besides the manifest.
	MaxEntries int
	// MaxCompressed is the most bytes of the gzip stream read.
	MaxCompressed int64
	// MaxLine is the most bytes of one line of a JSON lines entry (a
	// transcript, the prompt history, the decision log).
	MaxLine int64
	// MaxLines is the most lines, blank ones aside, of all the JSON lines
	// files of Claude Code's state together.
	MaxLines int
	// MaxDecisions is the most entries of the decision log: each is
	// decoded, and an entry takes more memory than its line.
	MaxDecisions int
}

// DefaultLimits are the caps of an export and an import.
var DefaultLimits = Limits{MaxEntry: 64 << 20, MaxTotal: 128 << 20, MaxEntries: 20000, MaxCompressed: 160 << 20,
	MaxLine: 16 << 20, MaxLines: 1000000, MaxDecisions: 250000}

// maxManifest bounds manifest.json (20000 entries of a path and a hash fit).
const maxManifest = 8 << 20

// Manifest is the file's table of contents.
type Manifest struct {
	Format  string    `json:"format"`
	Version int       `json:"version"`
	Created time.Time `json:"created"`
	// Paddock is the version of the paddock that wrote the file.
	Paddock string `json:"paddock_version,omitempty"`
	// ClaudeVersion is the Claude Code version the session ran ("" for
	// the pinned one of the paddock that wrote it).
	ClaudeVersion string `json:"claude_version,omitempty"`
	// Conversation is Claude Code's id of the conversation (a UUID): the
	// import resumes it with claude --resume. "" when the session never
	// held one.
	Conversation string `json:"conversation,omitempty"`
	// Entries lists every entry after the manifest, in the order written.
	Entries []ManifestEntry `json:"entries"`
	// LeftOut says, in words, what the export left out or changed (a
	// credential-shaped string replaced, a file that was not carried).
	LeftOut []string `json:"left_out,omitempty"`
}

// ManifestEntry is one entry as the manifest promises it.
type ManifestEntry struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Settings are the session's settings and history that travel: never its
// owner, shares, ids, box, workspace path or tokens.
type Settings struct {
	// Name is the session's name where it was exported (import --name
	// gives another).
	Name           string                 `json:"name"`
	Model          string                 `json:"model,omitempty"`
	Effort         string                 `json:"effort,omitempty"`
	CredentialMode session.CredentialMode `json:"credential_mode,omitempty"`
	Egress         string                 `json:"egress,omitempty"`
	EgressAllow    []string               `json:"egress_allow,omitempty"`
	EgressDeny     []string               `json:"egress_deny,omitempty"`
	EgressAsk      bool                   `json:"egress_ask,omitempty"`
	// EgressPolicies name policies of the Runner's config: the importing
	// Runner must have them too.
	EgressPolicies []string           `json:"egress_policies,omitempty"`
	EgressApproved []session.Approval `json:"egress_approved,omitempty"`
	Limits         limits.Limits      `json:"limits,omitzero"`
	Restart        activity.Policy    `json:"restart,omitempty"`
	Restarts       activity.Restarts  `json:"restarts,omitzero"`
	// Activity is claude's activity when the session was exported.
	Activity activity.Activity `json:"activity,omitzero"`
	// Created is when the session was first created.
	Created time.Time `json:"created,omitzero"`
	// Carried is what the rotated-away parts of the decision log counted
	// (decisionlog.Carry), so that budgets read back right after import.
	Carried *decisionlog.Carry `json:"decisions_carried,omitempty"`
}

// File is one file of Claude Code's state.
type File struct {
	// Path is relative to ~/.claude, "/"-separated (CheckClaudePath).
	Path    string    `json:"path"`
	Data    []byte    `json:"data"`
	ModTime time.Time `json:"mtime,omitzero"`
}

// Archive is a portable session, as Read returns it and Write takes it.
type Archive struct {
	Manifest  Manifest
	Settings  Settings
	Decisions []decisionlog.Entry
	Files     []File
}

var uuidRe = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// CheckConversationID checks a Claude Code conversation id: a UUID in
// lowercase hex, as Claude Code writes them (its transcript is <id>.jsonl).
func CheckConversationID(id string) error {
	if !uuidRe.MatchString(id) {
		return bad("conversation id %q is not a UUID like Claude Code's (8-4-4-4-12 lowercase hex digits)", clip(id))
	}
	return nil
}

// bad is the error of one broken rule: what is wrong, in words, wrapping
// errdefs.ErrInvalid (whose own text it leaves out, for refuse to add
// words after it).
func bad(format string, a ...any) error {
	return ruleError(fmt.Sprintf(format, a...))
}

type ruleError string

func (e ruleError) Error() string { return string(e) }
func (ruleError) Unwrap() error   { return errdefs.ErrInvalid }

// refuse is Read's error: what is wrong, then that nothing was written,
// so a person reading it knows where they stand.
func refuse(err error) error {
	return fmt.Errorf("not a usable paddock session file: %w (nothing was imported; export the session again with paddock session export)", err)
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
