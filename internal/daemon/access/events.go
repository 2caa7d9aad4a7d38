package access

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/people"
	"github.com/paddockhq/paddock/internal/sessions/events"
	"github.com/paddockhq/paddock/internal/sessions/ledger"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// seenFor is how long the all-sessions stream trusts what it found of a
// session's visibility to the caller: a share or an unshare shows in its
// events within this.
const seenFor = time.Second

// Events is the event stream of one session the caller may see, or of
// every session they own or were given a role on (ref ""), as Sessions
// lists them.
func (g *Guard) Events(ctx context.Context, ref string, after uint64) (api.Stream, error) {
	p, err := caller(ctx)
	if err != nil {
		return api.Stream{}, err
	}
	ev, ok := g.inner.(api.Eventer)
	if !ok {
		return api.Stream{}, fmt.Errorf("this Runner serves no events: %w", errdefs.ErrUnavailable)
	}
	id := ""
	if ref != "" {
		_, s, err := g.resolve(ctx, ref, session.OpView)
		if err != nil {
			return api.Stream{}, err
		}
		id = s.ID
	}
	in, err := ev.Events(ctx, id, after)
	if err != nil {
		return api.Stream{}, err
	}
	// Each event is passed on only if its session is the caller's to see
	// now; a session shared with them later shows from then on.
	out := make(chan events.Event, 64)
	stop := make(chan struct{})
	var once sync.Once
	seen := map[string]seenAt{}
	go func() {
		defer close(out)
		for e := range in.C {
			if !g.sees(ctx, p, e.Session, seen) {
				continue
			}
			select {
			case out <- e:
			case <-stop:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return api.Stream{C: out, Lagged: in.Lagged, Err: in.Err, Close: func() {
		once.Do(func() { close(stop); in.Close() })
	}}, nil
}

type seenAt struct {
	ok bool
	at time.Time
}

// sees is whether p has a role on session id, remembered for seenFor.
func (g *Guard) sees(ctx context.Context, p people.Person, id string, seen map[string]seenAt) bool {
	if v, ok := seen[id]; ok && time.Since(v.at) < seenFor {
		return v.ok
	}
	ok := false
	if s, err := g.inner.Session(ctx, id); err == nil {
		ok = s.RoleOf(p.UID) != session.RoleNone
	}
	seen[id] = seenAt{ok, time.Now()}
	return ok
}

// LastTurn is the session's last turn, for those who may see it.
func (g *Guard) LastTurn(ctx context.Context, ref string) (api.TurnResult, error) {
	p, s, err := g.resolve(ctx, ref, session.OpView)
	if err != nil {
		return api.TurnResult{}, err
	}
	t, ok := g.inner.(api.TurnReader)
	if !ok {
		return api.TurnResult{Turn: ledger.Turn{Parts: []ledger.TurnPart{}}}, fmt.Errorf("this Runner reads no turns: %w", errdefs.ErrUnavailable)
	}
	res, err := t.LastTurn(ctx, s.ID)
	res.Session, _ = visible(p, res.Session)
	return res, err
}

var (
	_ api.Eventer    = (*Guard)(nil)
	_ api.TurnReader = (*Guard)(nil)
)
