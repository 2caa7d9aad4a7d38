package access

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/audit"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// ExportSession writes a session out, for its operators and owner (and
// admins): the file carries its whole conversation. Each export, and each
// refusal of one to a person who may see the session, is audited.
func (g *Guard) ExportSession(ctx context.Context, ref string) ([]byte, error) {
	pt, ok := g.inner.(api.Porter)
	if !ok {
		return nil, fmt.Errorf("this Runner cannot export sessions: %w", errdefs.ErrUnavailable)
	}
	var file []byte
	_, err := g.act(ctx, ref, session.OpExport, audit.ActionExport, func(e *audit.Entry) {
		if file != nil {
			e.Detail = fmt.Sprintf("%d bytes", len(file))
		}
	}, func(id string) (session.Session, error) {
		var err error
		file, err = pt.ExportSession(ctx, id)
		return session.Session{ID: id}, err
	})
	if err != nil {
		return nil, err
	}
	return file, nil
}

// ImportSession makes a session of a session file, owned by the caller
// as one they create with run: a workspace must be their own directory
// (admins excepted). What the file asks for beyond the Runner's defaults
// is the importer's to take, by a flag (the Runner's adopt): the audit
// names the flags given and the session's credential mode and egress.
// Each import is audited, refused ones too.
func (g *Guard) ImportSession(ctx context.Context, req api.ImportRequest, file io.Reader) (api.ImportResult, error) {
	p, err := caller(ctx)
	if err != nil {
		return api.ImportResult{}, err
	}
	pt, ok := g.inner.(api.Porter)
	if !ok {
		return api.ImportResult{}, fmt.Errorf("this Runner cannot import sessions: %w", errdefs.ErrUnavailable)
	}
	if req.Workspace != "" && !p.Admin {
		ws, err := OwnWorkspace(req.Workspace, p.UID)
		if err != nil {
			g.record(p, audit.ActionImport, nil, err, func(e *audit.Entry) { e.SessionName = req.Name; e.Detail = "workspace " + req.Workspace })
			return api.ImportResult{}, err
		}
		req.Workspace = ws
	}
	res, err := pt.ImportSession(ctx, req, file)
	s := res.Session
	g.record(p, audit.ActionImport, &s, err, func(e *audit.Entry) {
		if e.SessionName == "" {
			e.SessionName = req.Name
		}
		e.Detail = fmt.Sprintf("conversation=%s files=%d decisions=%d backend=%s", orDash(res.Conversation), res.Files, res.Decisions, orDash(s.Backend))
		if s.Workspace != "" {
			e.Detail += " workspace=" + s.Workspace
		}
		if s.ID != "" {
			e.Detail += fmt.Sprintf(" credential_mode=%s egress=%s", orDash(string(s.CredentialMode)), orDash(s.Egress))
		}
		var kept []string
		for flag, on := range map[string]bool{"egress": req.KeepEgress, "credential_mode": req.KeepCredentialMode, "limits": req.KeepLimits} {
			if on {
				kept = append(kept, flag)
			}
		}
		if len(kept) > 0 {
			sort.Strings(kept)
			e.Detail += " kept=" + strings.Join(kept, ",")
		}
	})
	if err != nil {
		return res, err
	}
	res.Session, _ = visible(p, s)
	return res, nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

var _ api.Porter = (*Guard)(nil)
