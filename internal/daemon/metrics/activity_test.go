package metrics

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/sessions/activity"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// TestSessionsByActivity: running sessions are counted by what claude
// does; sessions that do not run are not.
func TestSessionsByActivity(t *testing.T) {
	m := New(func(context.Context) ([]session.Session, error) {
		return []session.Session{
			{Observed: session.Running, Activity: activity.Activity{State: activity.Working}},
			{Observed: session.Running, Activity: activity.Activity{State: activity.Working}},
			{Observed: session.Running, Activity: activity.Activity{State: activity.Exited}},
			{Observed: session.Running},
			{Observed: session.Asleep, Activity: activity.Activity{State: activity.Waiting}},
		}, nil
	})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`paddock_sessions_activity{activity="working"} 2`,
		`paddock_sessions_activity{activity="exited"} 1`,
		`paddock_sessions_activity{activity="waiting"} 0`,
		`paddock_sessions_activity{activity="unknown"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("no %s in:\n%s", want, body)
		}
	}
}
