package web

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/people"
	"github.com/paddockhq/paddock/internal/proxy/egress"
	"github.com/paddockhq/paddock/internal/sessions/activity"
	"github.com/paddockhq/paddock/internal/sessions/events"
	"github.com/paddockhq/paddock/internal/sessions/ledger"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// liveBackend has several sessions in several states, a connection
// waiting for approval, an event stream and a last turn.
type liveBackend struct {
	*fakeBackend
	t0  time.Time
	hub *events.Hub
	// streamUser is who asked for the stream last.
	streamUser string
	// approved are the approvals asked for.
	approved []api.ApproveRequest
}

func (b *liveBackend) Sessions(ctx context.Context) ([]session.Session, error) {
	at := func(min int) time.Time { return b.t0.Add(time.Duration(min) * time.Minute) }
	run := func(id string, created int, st activity.State, since int) session.Session {
		return session.Session{ID: id, Name: id, Observed: session.Running, Created: at(created), Activity: activity.Activity{State: st, Since: at(since)}}
	}
	asleep := run("asleep", 9, activity.Waiting, 9)
	asleep.Observed = session.Asleep
	frozen := run("frozen", 8, activity.Waiting, 8)
	frozen.Frozen = true
	return []session.Session{
		run("old-working", 0, activity.Working, 1),
		run("new-working", 5, activity.Working, 6),
		run("waiting-late", 1, activity.Waiting, 7),
		run("waiting-early", 2, activity.Waiting, 3),
		run("exited", 3, activity.Exited, 4),
		run("asks", 4, activity.Working, 5),
		asleep, frozen,
	}, nil
}

func (b *liveBackend) EgressPending(context.Context) ([]api.PendingView, error) {
	return []api.PendingView{{Pending: egress.Pending{Session: "asks", Host: "example.com", Port: 443, Since: b.t0}, Name: "asks"}}, nil
}

func (b *liveBackend) ApproveEgress(_ context.Context, _ string, req api.ApproveRequest) (api.ApproveResult, error) {
	b.approved = append(b.approved, req)
	return api.ApproveResult{}, nil
}

func (b *liveBackend) Events(ctx context.Context, ref string, after uint64) (api.Stream, error) {
	p, _ := people.From(ctx)
	b.streamUser = p.Name
	sub := b.hub.Subscribe(after)
	return api.Stream{C: sub.C, Lagged: sub.Lagged, Err: sub.Err, Close: sub.Close}, nil
}

func (b *liveBackend) LastTurn(_ context.Context, ref string) (api.TurnResult, error) {
	return api.TurnResult{Session: session.Session{Name: ref}, Turn: ledger.Turn{Prompt: "hi", Parts: []ledger.TurnPart{{Type: "text", Text: "hello"}}, Ended: true}, Done: true}, nil
}

// TestNeedsYouFirst: the page's list puts a session waiting for an
// approval first, then those waiting at claude's prompt (longest waiting
// first), then an exited claude; then the rest, newest first. Asleep and
// frozen sessions wait for nothing.
func TestNeedsYouFirst(t *testing.T) {
	lb := &liveBackend{fakeBackend: &fakeBackend{}, t0: time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC), hub: events.New()}
	st := siteWith(t, lb)
	hs := st.Server
	c := loggedIn(t, st)
	resp, err := c.Get(hs.URL + "/api/sessions")
	if err != nil {
		t.Fatal(err)
	}
	var rows []Row
	err = json.NewDecoder(resp.Body).Decode(&rows)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.Name+":"+r.NeedsYou)
	}
	want := "asks:approval waiting-early:waiting waiting-late:waiting exited:exited asleep: frozen: new-working: old-working:"
	if strings.Join(got, " ") != want {
		t.Fatalf("order:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	if rows[0].Pending != 1 || !rows[0].PendingSince.Equal(lb.t0) {
		t.Fatalf("the pending count: %+v", rows[0])
	}
}

// TestPageEvents: the page's event stream needs the login's key like any
// request, is asked as the logged-in person, and carries the hub's events
// as server-sent events; the last turn is served as the API's; a logout
// ends the open stream.
func TestPageEvents(t *testing.T) {
	lb := &liveBackend{fakeBackend: &fakeBackend{}, hub: events.New()}
	st := siteWith(t, lb)
	st.s.recheck = 20 * time.Millisecond
	hs := st.Server
	c := loggedInAs(t, st, 1234)

	resp, err := cookieOnly(c).Get(hs.URL + "/api/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("the stream with the cookie alone: %d", resp.StatusCode)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", hs.URL+"/api/events", nil)
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || lb.streamUser != "u1234" {
		t.Fatalf("the stream: %d %q, asked as %q", resp.StatusCode, resp.Header.Get("Content-Type"), lb.streamUser)
	}
	lb.hub.ActivityChanged("abc", "demo", activity.Activity{State: activity.Working}, activity.Activity{State: activity.Waiting, Since: time.Now()})
	got := make(chan events.Event, 4)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		api.ReadEvents(bufio.NewReader(resp.Body), func(e events.Event) bool {
			select {
			case got <- e:
			default:
			}
			return true
		})
	}()
	for seen := map[events.Type]bool{}; !seen[events.TurnEnded]; {
		select {
		case e := <-got:
			seen[e.Type] = true
			if e.Name != "demo" {
				t.Fatalf("event %+v", e)
			}
		case <-ctx.Done():
			t.Fatal("no turn.ended on the page's stream")
		}
	}

	tr, err := c.Get(hs.URL + "/api/sessions/demo/turn")
	if err != nil {
		t.Fatal(err)
	}
	var res api.TurnResult
	json.NewDecoder(tr.Body).Decode(&res)
	tr.Body.Close()
	if tr.StatusCode != 200 || res.Turn.Prompt != "hi" || len(res.Turn.Parts) != 1 || !res.Done {
		t.Fatalf("the turn: %d %+v", tr.StatusCode, res)
	}

	// Logged out: the open stream ends (its login is checked again).
	lo, _ := http.NewRequest("POST", hs.URL+"/logout", nil)
	lo.Header.Set("X-Paddock", "1")
	if r, err := c.Do(lo); err != nil || r.StatusCode != 200 {
		t.Fatalf("logout: %v %v", r, err)
	}
	select {
	case <-ended:
		if ctx.Err() != nil {
			t.Fatal("the stream outlived the login")
		}
	case <-ctx.Done():
		t.Fatal("the stream outlived the login")
	}
}

// TestApproveIsNoCrossSiteForm: an approval, like every change, needs the
// X-Paddock header that no cross-site form can send; without it nothing
// is approved.
func TestApproveIsNoCrossSiteForm(t *testing.T) {
	lb := &liveBackend{fakeBackend: &fakeBackend{}, hub: events.New()}
	st := siteWith(t, lb)
	hs := st.Server
	c := loggedIn(t, st)
	post := func(header bool) int {
		req, _ := http.NewRequest("POST", hs.URL+"/api/sessions/asks/egress/approve", strings.NewReader(`{"rule":"example.com:443","scope":"session"}`))
		req.Header.Set("Content-Type", "application/json")
		if header {
			req.Header.Set("X-Paddock", "1")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(false); code != 403 || len(lb.approved) != 0 {
		t.Fatalf("a cross-site approval: %d, %d approved", code, len(lb.approved))
	}
	if code := post(true); code != 200 || len(lb.approved) != 1 || lb.approved[0].Rule != "example.com:443" {
		t.Fatalf("the page's approval: %d, %+v", code, lb.approved)
	}
}

// auditBackend records the page's logins.
type auditBackend struct {
	*fakeBackend
	mu     sync.Mutex
	logins []string
}

func (a *auditBackend) RecordWebLogin(p people.Person, how, detail string, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.logins = append(a.logins, fmt.Sprintf("%s %s %s %v", p.Name, how, detail, err != nil))
}

// TestURLLoginAudited: a one-time login URL's use is in the audit log,
// as the person it was made for; one made for a person taken out of the
// group since is refused, and the refusal is recorded too.
func TestURLLoginAudited(t *testing.T) {
	ab := &auditBackend{fakeBackend: &fakeBackend{}}
	st := siteWith(t, ab)
	loggedInAs(t, st, 1300)
	u := st.newLoginFor(t, 1301)
	gone.Store(uint32(1301), true)
	defer gone.Delete(uint32(1301))
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 || resp.Header.Get("Set-Cookie") != "" {
		t.Fatalf("a login for a person gone: %d, cookie %q", resp.StatusCode, resp.Header.Get("Set-Cookie"))
	}
	ab.mu.Lock()
	defer ab.mu.Unlock()
	if got := strings.Join(ab.logins, "; "); got != "u1300 url used false;  url refused true" {
		t.Fatalf("audited: %q", got)
	}
}

// TestWorkerHandlesNoRequest: the page's service worker only shows
// notifications: it has no fetch handler (so it can neither cache nor
// change what the Runner answers), and it is served, like every static
// file, to a logged-in browser only.
func TestWorkerHandlesNoRequest(t *testing.T) {
	sw, err := static.ReadFile("static/sw.js")
	if err != nil {
		t.Fatal(err)
	}
	code := regexp.MustCompile(`(?m)^\s*//.*$`).ReplaceAllString(string(sw), "")
	if strings.Contains(code, "fetch") || !strings.Contains(code, `addEventListener("notificationclick"`) {
		t.Fatalf("sw.js handles more than notifications:\n%s", code)
	}
	st, _ := setup(t)
	resp, err := http.Get(st.URL + "/sw.js")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("sw.js without a login: %d", resp.StatusCode)
	}
}
