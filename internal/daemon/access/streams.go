package access

// streams.go: a terminal joined, and the open streams cut when their
// person loses the right to them.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/audit"
	"github.com/paddockhq/paddock/internal/daemon/people"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// Attach joins the terminal as the role asked for, if the caller has it;
// no role asked gives the best they have (driver, else observer). Asking
// for driver without the right is refused, never granted.
func (g *Guard) Attach(ctx context.Context, ref string, req api.AttachRequest) (api.Participant, error) {
	op := session.OpObserve
	if req.Role == "driver" {
		op = session.OpDrive
	} else if req.Role != "" && req.Role != "observer" {
		return nil, fmt.Errorf("role %q is not driver or observer: %w", req.Role, errdefs.ErrInvalid)
	}
	p, s, err := g.resolve(ctx, ref, op)
	if err != nil {
		if errors.Is(err, errdefs.ErrForbidden) {
			if s2, err2 := g.find(ctx, p, ref); err2 == nil {
				g.record(p, audit.ActionAttach, &s2, err, func(e *audit.Entry) { e.Role = req.Role })
			}
		}
		return nil, err
	}
	if req.Role == "" {
		req.Role = "observer"
		if s.YourRole.AtLeast(session.RoleDriver) {
			req.Role = "driver"
		}
	}
	need := session.RoleObserver
	if req.Role == "driver" {
		need = session.RoleDriver
	}
	part, err := g.inner.Attach(ctx, s.ID, req)
	g.record(p, audit.ActionAttach, &s, err, func(e *audit.Entry) { e.Role = req.Role })
	if err != nil {
		return nil, err
	}
	tp := &trackedPart{Participant: part, g: g, p: p, s: s, role: req.Role, start: time.Now()}
	tp.st = g.track(p.UID, s.ID, need, tp.Leave)
	return tp, nil
}

type trackedPart struct {
	api.Participant
	g     *Guard
	p     people.Person
	s     session.Session
	role  string
	start time.Time
	st    *stream
	once  sync.Once
}

// JoinedAs is the role the participant joined with (what the caller got).
func (t *trackedPart) JoinedAs() string { return t.role }

// Leave ends the span, once, and records it.
func (t *trackedPart) Leave() {
	t.once.Do(func() {
		t.Participant.Leave()
		t.g.untrack(t.st)
		d := time.Since(t.start).Round(time.Second)
		t.g.record(t.p, audit.ActionDetach, &t.s, nil, func(e *audit.Entry) {
			e.Role = t.role
			e.Detail = "after " + d.String()
		})
	})
}

// stream is an open attach or exec, re-checked while it runs.
type stream struct {
	uid     uint32
	session string
	need    session.Role
	cut     func()
}

func (g *Guard) track(uid uint32, id string, need session.Role, cut func()) *stream {
	st := &stream{uid: uid, session: id, need: need, cut: cut}
	g.mu.Lock()
	g.streams[st] = struct{}{}
	g.mu.Unlock()
	return st
}

func (g *Guard) untrack(st *stream) {
	g.mu.Lock()
	delete(g.streams, st)
	g.mu.Unlock()
}

// Recheck cuts every open stream whose person lost the right to it: out
// of the group, unshared, or shared with a lower role.
func (g *Guard) Recheck(ctx context.Context) {
	g.mu.Lock()
	open := make([]*stream, 0, len(g.streams))
	for st := range g.streams {
		open = append(open, st)
	}
	g.mu.Unlock()
	for _, st := range open {
		p, err := g.dir.Person(st.uid)
		ok := err == nil
		if ok {
			s, err := g.inner.Session(ctx, st.session)
			ok = err == nil && roleOf(p, &s).AtLeast(st.need)
		}
		if !ok {
			g.log.Info("access withdrawn: a stream is cut", "uid", st.uid, "session", st.session)
			g.untrack(st)
			go st.cut()
		}
	}
}

// Watch runs Recheck every interval until ctx is done, so that a user
// taken out of the group loses their open streams within it.
func (g *Guard) Watch(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			g.Recheck(ctx)
		}
	}
}
