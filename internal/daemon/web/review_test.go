package web

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/gitident"
)

// reviewBackend is a Backend with clone sessions and messages: its diff
// is diff (or err), and it records merges and messages.
type reviewBackend struct {
	*fakeBackend
	diff string
	err  error

	mu       sync.Mutex
	merges   []api.MergeOptions
	messages []string
}

func (b *reviewBackend) DiffSession(_ context.Context, ref string, o api.DiffOptions, w io.Writer) error {
	if o != (api.DiffOptions{}) {
		return fmt.Errorf("the page asked for %+v", o)
	}
	if b.err != nil {
		return b.err
	}
	for s := b.diff; s != ""; { // in pieces, as a stream
		n := min(len(s), 1<<16)
		if _, err := io.WriteString(w, s[:n]); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		s = s[n:]
	}
	return nil
}

func (b *reviewBackend) FetchSession(context.Context, string) (api.FetchResult, error) {
	return api.FetchResult{}, nil
}

func (b *reviewBackend) MergeSession(_ context.Context, ref string, o api.MergeOptions) (api.MergeResult, error) {
	b.mu.Lock()
	b.merges = append(b.merges, o)
	b.mu.Unlock()
	return api.MergeResult{Into: "main", Kind: "fast-forward"}, nil
}

func (b *reviewBackend) SendMessage(_ context.Context, ref string, req api.MessageRequest) (api.MessageResult, error) {
	b.mu.Lock()
	b.messages = append(b.messages, req.Text)
	b.mu.Unlock()
	return api.MessageResult{Bytes: len(req.Text), Accepted: true}, nil
}

func reviewSite(t *testing.T, rb *reviewBackend) *site {
	rb.fakeBackend = &fakeBackend{}
	s := New(rb, who, nil)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return &site{srv, s}
}

func get(t *testing.T, c *http.Client, u string) (int, string, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

func post(t *testing.T, c *http.Client, u, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", u, strings.NewReader(body))
	req.Header.Set("X-Paddock", "1")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestReviewRoutes: the diff as text (cut, and said so, past MaxDiff; a
// refusal as the JSON error the page shows); a merge never carries an
// identity from the page; a message reaches the Backend as sent.
func TestReviewRoutes(t *testing.T) {
	rb := &reviewBackend{diff: "diff --git a/x b/x\n+hello\n"}
	srv := reviewSite(t, rb)
	c := loggedIn(t, srv)

	if code, ct, body := get(t, c, srv.URL+"/api/sessions/demo/diff"); code != 200 || !strings.HasPrefix(ct, "text/plain") || body != rb.diff {
		t.Fatalf("diff: %d %s %q", code, ct, body)
	}
	rb.diff = strings.Repeat("+0123456789abcdef\n", MaxDiff/16)
	if code, _, body := get(t, c, srv.URL+"/api/sessions/demo/diff"); code != 200 || len(body) != MaxDiff+len(TooBig) || !strings.HasSuffix(body, TooBig) {
		t.Fatalf("a large diff: %d, %d bytes, ends %q", code, len(body), body[max(0, len(body)-100):])
	}
	rb.err = fmt.Errorf("cannot diff session \"demo\": it is asleep: %w", errdefs.ErrConflict)
	if code, ct, body := get(t, c, srv.URL+"/api/sessions/demo/diff"); code != 409 || ct != "application/json" || !strings.Contains(body, "it is asleep") {
		t.Fatalf("a refused diff: %d %s %q", code, ct, body)
	}
	// Without the page's key, nothing.
	if code, _, _ := get(t, cookieOnly(c), srv.URL+"/api/sessions/demo/diff"); code != 401 {
		t.Fatalf("a diff for the cookie alone: %d", code)
	}

	if code, body := post(t, c, srv.URL+"/api/sessions/demo/merge", `{"squash":true,"identity":{"name":"Mallory","email":"m@example.com"}}`); code != 200 || !strings.Contains(body, "fast-forward") {
		t.Fatalf("merge: %d %s", code, body)
	}
	if len(rb.merges) != 1 || !rb.merges[0].Squash || rb.merges[0].Identity != (*gitident.Identity)(nil) {
		t.Fatalf("the Backend was asked to merge %+v", rb.merges)
	}
	const words = "Review of your change:\n\nmain.go, line 3:\n> +x\nwhy?"
	if code, body := post(t, c, srv.URL+"/api/sessions/demo/message", fmt.Sprintf("{%q:%q}", "text", words)); code != 200 || !strings.Contains(body, `"accepted":true`) {
		t.Fatalf("message: %d %s", code, body)
	}
	if len(rb.messages) != 1 || rb.messages[0] != words {
		t.Fatalf("the Backend got messages %q", rb.messages)
	}
	// A POST without X-Paddock: 1 (what a cross-site form sends) is refused.
	req, _ := http.NewRequest("POST", srv.URL+"/api/sessions/demo/message", strings.NewReader(`{"text":"forged"}`))
	if resp, err := c.Do(req); err != nil || resp.StatusCode != 403 && resp.StatusCode != 401 {
		t.Fatalf("a message without X-Paddock: %v %v", resp.StatusCode, err)
	}
	if len(rb.messages) != 1 {
		t.Fatalf("a forged message reached the Backend: %q", rb.messages)
	}
}
