package mcpserver

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/activity"
	"github.com/paddockhq/paddock/internal/sessions/ledger"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// fake is a Runner of one session that answers a wait only on its
// third poll, and whose diff is longer than the tools return.
type fake struct {
	created api.CreateRequest
	polls   int
	sent    string
}

func (f *fake) s() session.Session {
	return session.Session{ID: "abc123", Name: "one", Observed: session.Running, Backend: "local", Activity: activity.Activity{State: activity.Waiting}}
}
func (f *fake) Sessions(context.Context) ([]session.Session, error) {
	return []session.Session{f.s()}, nil
}
func (f *fake) Session(context.Context, string) (session.Session, error) {
	return f.s(), nil
}
func (f *fake) CreateSession(_ context.Context, req api.CreateRequest) (session.Session, error) {
	f.created = req
	return f.s(), nil
}
func (f *fake) SendMessage(_ context.Context, ref string, req api.MessageRequest) (api.MessageResult, error) {
	if ref != "one" {
		return api.MessageResult{}, fmt.Errorf("no session %q that you can see: %w", ref, errdefs.ErrNotFound)
	}
	f.sent = req.Text
	return api.MessageResult{Session: f.s(), Accepted: true, Bytes: len(req.Text)}, nil
}
func (f *fake) WaitActivity(_ context.Context, _ string, want activity.State, poll time.Duration) (api.WaitResult, error) {
	f.polls++
	return api.WaitResult{Session: f.s(), Met: f.polls >= 3 && want == activity.Waiting}, nil
}
func (f *fake) LastTurn(context.Context, string) (api.TurnResult, error) {
	return api.TurnResult{Session: f.s(), Done: true, Turn: ledger.Turn{Prompt: "go", Parts: []ledger.TurnPart{{Type: "text", Text: "done it"}}}}, nil
}
func (f *fake) DiffSession(_ context.Context, _ string, _ api.DiffOptions, w io.Writer) error {
	_, err := io.WriteString(w, strings.Repeat("+x\n", maxDiff))
	return err
}
func (f *fake) Sleep(context.Context, string) (session.Session, error) { return f.s(), nil }
func (f *fake) Wake(context.Context, string) (session.Session, error)  { return f.s(), nil }
func (f *fake) RemoveSession(context.Context, string, bool) (session.Session, error) {
	return f.s(), nil
}

// TestTools: each tool calls the Runner as documented; create defaults
// the workspace to where paddock mcp runs; wait asks again until met; a
// long diff is cut and says so; a Runner's refusal is the tool's error.
func TestTools(t *testing.T) {
	f := &fake{}
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	if _, err := New(f, "/home/me/app").Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(tool string, args map[string]any) (string, bool) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		var out []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				out = append(out, tc.Text)
			}
		}
		return strings.Join(out, "\n"), res.IsError
	}
	if out, bad := call("create_session", map[string]any{"prompt": "fix it", "backend": "docker"}); bad || !strings.Contains(out, `"name": "one"`) ||
		f.created.Workspace != "/home/me/app" || string(f.created.Prompt) != "fix it" || f.created.Backend != "docker" {
		t.Fatalf("create: %s %+v", out, f.created)
	}
	if out, bad := call("create_session", map[string]any{"prompt": ""}); !bad || !strings.Contains(out, "prompt is empty") {
		t.Fatalf("create without a prompt: %s", out)
	}
	if out, _ := call("wait", map[string]any{"session": "one", "timeout_seconds": 30}); !strings.Contains(out, `"met": true`) || f.polls != 3 {
		t.Fatalf("wait: %s after %d polls", out, f.polls)
	}
	if out, _ := call("read_turn", map[string]any{"session": "one"}); !strings.Contains(out, "done it") {
		t.Fatalf("read_turn: %s", out)
	}
	if out, bad := call("send_message", map[string]any{"session": "one", "text": "more"}); bad || f.sent != "more" || !strings.Contains(out, `"accepted": true`) {
		t.Fatalf("send: %s", out)
	}
	if out, bad := call("send_message", map[string]any{"session": "two", "text": "more"}); !bad || !strings.Contains(out, "that you can see") {
		t.Fatalf("send to no session: %s", out)
	}
	if out, _ := call("diff", map[string]any{"session": "one"}); len(out) > maxDiff+200 || !strings.Contains(out, "cut: the diff is") {
		t.Fatalf("diff: %d bytes", len(out))
	}
	for _, tool := range []string{"sleep", "wake", "remove"} {
		if out, bad := call(tool, map[string]any{"session": "one"}); bad || !strings.Contains(out, "one") {
			t.Fatalf("%s: %s", tool, out)
		}
	}
	if out, bad := call("list_sessions", nil); bad || !strings.Contains(out, `"name": "one"`) {
		t.Fatalf("list_sessions: %s", out)
	}
	if _, bad := call("wait", map[string]any{}); !bad {
		t.Fatal("wait without a session")
	}
}
