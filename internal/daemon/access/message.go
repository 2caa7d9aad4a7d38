package access

import (
	"context"
	"fmt"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/audit"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// SendMessage types a message into a session's claude for those who may
// type into its terminal (drivers and up): it is what their keys could
// do. Each message, and each refusal of one to a person who may see the
// session, is audited with its size, never its words.
func (g *Guard) SendMessage(ctx context.Context, ref string, req api.MessageRequest) (api.MessageResult, error) {
	m, ok := g.inner.(api.Messenger)
	if !ok {
		return api.MessageResult{}, fmt.Errorf("this Runner cannot send messages: %w", errdefs.ErrUnavailable)
	}
	var res api.MessageResult
	s, err := g.act(ctx, ref, session.OpMessage, audit.ActionMessage, func(e *audit.Entry) {
		e.Detail = fmt.Sprintf("%d bytes", len(req.Text))
		switch {
		case res.Accepted:
			e.Detail += ", taken"
		case res.Queued:
			e.Detail += ", queued"
		}
	}, func(id string) (session.Session, error) {
		var err error
		res, err = m.SendMessage(ctx, id, req)
		return res.Session, err
	})
	res.Session = s
	return res, err
}

var _ api.Messenger = (*Guard)(nil)
