// Package mcpserver is `paddock mcp`: a Model Context Protocol server (the
// official Go SDK, over stdio) that gives another agent paddock's sessions
// as tools: list, create with a prompt, send a message, wait for claude,
// read the last turn, the diff, sleep, wake and remove.
//
// It is a client of the Runner's socket API, like the CLI: every call is
// made as the person who started `paddock mcp` (the kernel says who, on
// the socket), with their roles, and nothing it does is out of reach of
// `paddock` itself. It holds no credential and no token.
package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paddockhq/paddock/internal/base/version"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/activity"
	"github.com/paddockhq/paddock/internal/sessions/firstprompt"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// Client is what the server needs of the Runner (api.Client).
type Client interface {
	Sessions(ctx context.Context) ([]session.Session, error)
	Session(ctx context.Context, ref string) (session.Session, error)
	CreateSession(ctx context.Context, req api.CreateRequest) (session.Session, error)
	SendMessage(ctx context.Context, ref string, req api.MessageRequest) (api.MessageResult, error)
	WaitActivity(ctx context.Context, ref string, want activity.State, poll time.Duration) (api.WaitResult, error)
	LastTurn(ctx context.Context, ref string) (api.TurnResult, error)
	DiffSession(ctx context.Context, ref string, o api.DiffOptions, w io.Writer) error
	Sleep(ctx context.Context, ref string) (session.Session, error)
	Wake(ctx context.Context, ref string) (session.Session, error)
	RemoveSession(ctx context.Context, ref string, keepVolume bool) (session.Session, error)
}

// Bounds of the tools.
const (
	// MaxWait is the longest one wait call waits.
	MaxWait = 10 * time.Minute
	// maxDiff is the most of a diff returned; more is cut, and said.
	maxDiff = 256 << 10
)

// Inputs of the tools. The jsonschema tags are their descriptions.
type (
	// Ref names a session.
	Ref struct {
		Session string `json:"session" jsonschema:"the session's name or id"`
	}
	createIn struct {
		Prompt    string `json:"prompt" jsonschema:"claude's first message: the task"`
		Name      string `json:"name,omitempty" jsonschema:"a name for the session (default: one is made)"`
		Workspace string `json:"workspace,omitempty" jsonschema:"the directory claude works in (default: where paddock mcp runs)"`
		Backend   string `json:"backend,omitempty" jsonschema:"local, docker or kubernetes (default: the Runner's)"`
		Egress    string `json:"egress,omitempty" jsonschema:"offline, allowlist or ask (default: the Runner's)"`
		Clone     bool   `json:"clone,omitempty" jsonschema:"work in a clone of the workspace's repository, on a branch of its own"`
	}
	sendIn struct {
		Session string `json:"session" jsonschema:"the session's name or id"`
		Text    string `json:"text" jsonschema:"the message, as typed at claude's prompt"`
	}
	waitIn struct {
		Session string `json:"session" jsonschema:"the session's name or id"`
		For     string `json:"for,omitempty" jsonschema:"the activity to wait for: waiting (default: claude finished its turn and waits), working or exited"`
		Timeout int    `json:"timeout_seconds,omitempty" jsonschema:"the most seconds to wait (default 120, at most 600)"`
	}
	diffIn struct {
		Session string `json:"session" jsonschema:"the session's name or id"`
		Stat    bool   `json:"stat,omitempty" jsonschema:"a diffstat instead of the whole diff"`
	}
)

// New makes the server over c; workdir is the default workspace.
func New(c Client, workdir string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "paddock", Title: "paddock sessions", Version: version.String()}, &mcp.ServerOptions{
		Instructions: "Each session is the real Claude Code, running with every permission in an isolated box on this machine, " +
			"its model credential kept outside the box. Create one with a task (create_session), wait for it to finish its turn (wait), " +
			"read what it did (read_turn, diff), give it more to do (send_message), and sleep or remove it when done.",
	})
	no, yes := false, true
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &no}
	mcp.AddTool(s, &mcp.Tool{Name: "list_sessions", Description: "Your sessions (and those shared with you): name, state, claude's activity.", Annotations: ro},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			ss, err := c.Sessions(ctx)
			if err != nil {
				return nil, nil, err
			}
			out := make([]summary, 0, len(ss))
			for _, x := range ss {
				if x.Live() {
					out = append(out, summarize(x))
				}
			}
			return result(out)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "create_session", Description: "Start a sandboxed Claude Code session on a task. It answers once the session runs; claude then works on the prompt: use wait, then read_turn.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: &yes}},
		func(ctx context.Context, _ *mcp.CallToolRequest, in createIn) (*mcp.CallToolResult, any, error) {
			if in.Prompt == "" {
				return nil, nil, fmt.Errorf("prompt is empty: give claude its task")
			}
			ws := in.Workspace
			if ws == "" {
				ws = workdir
			}
			x, err := c.CreateSession(ctx, api.CreateRequest{Name: in.Name, Prompt: firstprompt.Text(in.Prompt), Workspace: ws, Backend: in.Backend, Egress: in.Egress, Clone: in.Clone})
			if err != nil {
				return nil, nil, err
			}
			return result(summarize(x))
		})
	mcp.AddTool(s, &mcp.Tool{Name: "send_message", Description: "Type a message into a running session's claude prompt and submit it. Answered once claude took it, or queued while claude works.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: &yes}},
		func(ctx context.Context, _ *mcp.CallToolRequest, in sendIn) (*mcp.CallToolResult, any, error) {
			res, err := c.SendMessage(ctx, in.Session, api.MessageRequest{Text: in.Text})
			if err != nil {
				return nil, nil, err
			}
			return result(map[string]any{"session": res.Session.Name, "accepted": res.Accepted, "queued": res.Queued, "bytes": res.Bytes})
		})
	mcp.AddTool(s, &mcp.Tool{Name: "wait", Description: "Wait until the session's claude is in an activity (default: waiting, its turn done), or the session stops, or the timeout passes; met says which.", Annotations: ro},
		func(ctx context.Context, _ *mcp.CallToolRequest, in waitIn) (*mcp.CallToolResult, any, error) {
			want := activity.State(in.For)
			if want == "" {
				want = activity.Waiting
			}
			d := 120 * time.Second
			if in.Timeout > 0 {
				d = min(time.Duration(in.Timeout)*time.Second, MaxWait)
			}
			deadline := time.Now().Add(d)
			for {
				left := time.Until(deadline)
				res, err := c.WaitActivity(ctx, in.Session, want, max(min(left, api.MaxWaitPoll), time.Second))
				if err != nil {
					return nil, nil, err
				}
				if res.Met || res.Session.Observed != session.Running || time.Until(deadline) <= 0 {
					return result(map[string]any{"met": res.Met, "session": summarize(res.Session)})
				}
			}
		})
	mcp.AddTool(s, &mcp.Tool{Name: "read_turn", Description: "The last turn of a running session's conversation: the prompt, claude's words, its tool calls and their results; done is false while claude still works.", Annotations: ro},
		func(ctx context.Context, _ *mcp.CallToolRequest, in Ref) (*mcp.CallToolResult, any, error) {
			res, err := c.LastTurn(ctx, in.Session)
			if err != nil {
				return nil, nil, err
			}
			return result(map[string]any{"session": summarize(res.Session), "done": res.Done, "turn": res.Turn})
		})
	mcp.AddTool(s, &mcp.Tool{Name: "diff", Description: "A clone session's change against the commit it started from, as a unified diff (or a diffstat).", Annotations: ro},
		func(ctx context.Context, _ *mcp.CallToolRequest, in diffIn) (*mcp.CallToolResult, any, error) {
			var b bytes.Buffer
			if err := c.DiffSession(ctx, in.Session, api.DiffOptions{Stat: in.Stat}, &b); err != nil {
				return nil, nil, err
			}
			text := b.String()
			if len(text) > maxDiff {
				text = text[:maxDiff] + fmt.Sprintf("\n… cut: the diff is %d bytes; see paddock diff %s\n", b.Len(), in.Session)
			}
			if text == "" {
				text = "no change"
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
		})
	lifecycle := func(name, desc string, f func(context.Context, string) (session.Session, error), destructive bool) {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: desc, Annotations: &mcp.ToolAnnotations{DestructiveHint: &destructive, OpenWorldHint: &no}},
			func(ctx context.Context, _ *mcp.CallToolRequest, in Ref) (*mcp.CallToolResult, any, error) {
				x, err := f(ctx, in.Session)
				if err != nil {
					return nil, nil, err
				}
				return result(summarize(x))
			})
	}
	lifecycle("sleep", "Stop a session's box, keeping its conversation and workspace; wake resumes it.", c.Sleep, false)
	lifecycle("wake", "Start a sleeping session again, its conversation resumed.", c.Wake, false)
	lifecycle("remove", "Remove a session: its box and, unless it is your own directory, its workspace volume.", func(ctx context.Context, ref string) (session.Session, error) {
		return c.RemoveSession(ctx, ref, false)
	}, true)
	return s
}

// Run serves the tools on stdin and stdout until the client goes.
func Run(ctx context.Context, c Client) error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	return New(c, wd).Run(ctx, &mcp.StdioTransport{})
}

// summary is what the tools show of a session.
type summary struct {
	Name     string `json:"name"`
	ID       string `json:"id"`
	State    string `json:"state"`
	Activity string `json:"activity,omitempty"`
	Backend  string `json:"backend"`
	Owner    string `json:"owner,omitempty"`
	Branch   string `json:"branch,omitempty"`
}

func summarize(s session.Session) summary {
	out := summary{Name: s.Name, ID: s.ID, State: string(s.Observed), Activity: string(s.Activity.State), Backend: s.Backend, Owner: s.Owner.Name}
	if s.Clone != nil {
		out.Branch = s.Clone.Branch
	}
	return out
}

// result is v as the tool's answer: JSON text.
func result(v any) (*mcp.CallToolResult, any, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
}
