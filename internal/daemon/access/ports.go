package access

import (
	"context"
	"fmt"
	"net"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/audit"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// porter is the Runner's ports, if it has them.
func (g *Guard) porter() (api.PortPublisher, error) {
	p, ok := g.inner.(api.PortPublisher)
	if !ok {
		return nil, fmt.Errorf("this Runner publishes no ports: %w", errdefs.ErrUnavailable)
	}
	return p, nil
}

// Ports lists a session's published ports, for observers and up.
func (g *Guard) Ports(ctx context.Context, ref string) ([]session.Port, error) {
	p, err := g.porter()
	if err != nil {
		return nil, err
	}
	_, s, err := g.resolve(ctx, ref, session.OpView)
	if err != nil {
		return nil, err
	}
	return p.Ports(ctx, s.ID)
}

// Publish publishes a box port on the host's loopback: an operator's
// right (every account on the host can then reach it).
func (g *Guard) Publish(ctx context.Context, ref string, req api.PortRequest) (session.Session, error) {
	p, err := g.porter()
	if err != nil {
		return session.Session{}, err
	}
	fill := func(e *audit.Entry) { e.Detail = fmt.Sprintf("publish box port %d on host port %d", req.Box, req.Host) }
	return g.act(ctx, ref, session.OpPort, audit.ActionPort, fill, func(id string) (session.Session, error) { return p.Publish(ctx, id, req) })
}

// Unpublish takes a published port back, as Publish.
func (g *Guard) Unpublish(ctx context.Context, ref string, box int) (session.Session, error) {
	p, err := g.porter()
	if err != nil {
		return session.Session{}, err
	}
	fill := func(e *audit.Entry) { e.Detail = fmt.Sprintf("take back box port %d", box) }
	return g.act(ctx, ref, session.OpPort, audit.ActionPort, fill, func(id string) (session.Session, error) { return p.Unpublish(ctx, id, box) })
}

// DialPort connects to a published port for a web preview: a driver's
// right, checked afresh on every connection.
func (g *Guard) DialPort(ctx context.Context, ref string, box int) (net.Conn, error) {
	d, ok := g.inner.(api.PortDialer)
	if !ok {
		return nil, fmt.Errorf("this Runner has no previews: %w", errdefs.ErrUnavailable)
	}
	_, s, err := g.resolve(ctx, ref, session.OpPreview)
	if err != nil {
		return nil, err
	}
	return d.DialPort(ctx, s.ID, box)
}

// EnterPreview records a person entering a port's web preview (once per
// preview login, not per connection) after checking they may.
func (g *Guard) EnterPreview(ctx context.Context, ref string, box int) (session.Session, error) {
	fill := func(e *audit.Entry) { e.Detail = fmt.Sprintf("box port %d", box) }
	return g.act(ctx, ref, session.OpPreview, audit.ActionPreview, fill, func(id string) (session.Session, error) { return g.inner.Session(ctx, id) })
}
