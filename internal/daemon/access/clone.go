package access

import (
	"context"
	"fmt"
	"io"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/audit"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// DiffSession shows a clone session's change to those who may watch it
// (observers and up): it is what its terminal shows being made.
func (g *Guard) DiffSession(ctx context.Context, ref string, o api.DiffOptions, w io.Writer) error {
	cl, ok := g.inner.(api.Cloner)
	if !ok {
		return fmt.Errorf("this Runner has no clone sessions: %w", errdefs.ErrUnavailable)
	}
	_, s, err := g.resolve(ctx, ref, session.OpDiff)
	if err != nil {
		return err
	}
	return cl.DiffSession(ctx, s.ID, o, w)
}

// FetchSession brings a clone session's branch into its host repository,
// for its operators and owner (and admins); each fetch, and each refusal
// of one to a person who may see the session, is audited.
func (g *Guard) FetchSession(ctx context.Context, ref string) (api.FetchResult, error) {
	cl, ok := g.inner.(api.Cloner)
	if !ok {
		return api.FetchResult{}, fmt.Errorf("this Runner has no clone sessions: %w", errdefs.ErrUnavailable)
	}
	var res api.FetchResult
	_, err := g.act(ctx, ref, session.OpFetch, audit.ActionFetch, func(e *audit.Entry) {
		if res.Ref != "" {
			e.Detail = res.Ref + " " + res.Commit
		}
	}, func(id string) (session.Session, error) {
		var err error
		res, err = cl.FetchSession(ctx, id)
		return session.Session{ID: id}, err
	})
	return res, err
}

// MergeSession merges a clone session's branch into a branch of its host
// repository, whose working tree it may write: for its owner (and
// admins) only. Each merge, and each refusal of one to a person who may
// see the session, is audited.
func (g *Guard) MergeSession(ctx context.Context, ref string, o api.MergeOptions) (api.MergeResult, error) {
	cl, ok := g.inner.(api.Cloner)
	if !ok {
		return api.MergeResult{}, fmt.Errorf("this Runner has no clone sessions: %w", errdefs.ErrUnavailable)
	}
	var res api.MergeResult
	_, err := g.act(ctx, ref, session.OpMerge, audit.ActionMerge, func(e *audit.Entry) {
		if res.Kind != "" {
			e.Detail = res.Fetch.Ref + " into " + res.Into + ": " + res.Kind + " " + res.New
		}
	}, func(id string) (session.Session, error) {
		var err error
		res, err = cl.MergeSession(ctx, id, o)
		return session.Session{ID: id}, err
	})
	return res, err
}

var _ api.Cloner = (*Guard)(nil)
