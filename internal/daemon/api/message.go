package api

import (
	"context"
	"net/http"
	"net/url"

	"github.com/paddockhq/paddock/internal/sessions/message"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// Messenger is the optional Backend feature behind
//
//	POST /v1/sessions/{ref}/message   MessageRequest → MessageResult
//
// through which a person's words reach a running session's claude
// without a terminal (paddock send, the web page's review comments).
type Messenger interface {
	// SendMessage types req.Text into claude's prompt, as the person's
	// own words, and submits it. It answers once claude took it (its UserPromptSubmit),
	// or at once, Queued, when claude is in a turn: Claude Code keeps a
	// message typed meanwhile for when the turn lets it in.
	SendMessage(ctx context.Context, ref string, req MessageRequest) (MessageResult, error)
}

// MessageRequest is a message for a session's claude.
type MessageRequest struct {
	// Text is the message (message.Parse says what is refused).
	Text string `json:"text"`
}

// MessageResult says what became of a message.
type MessageResult struct {
	Session session.Session `json:"session"`
	// Bytes is the size of the text typed.
	Bytes int `json:"bytes"`
	// Accepted says claude took it as a prompt; Queued says claude was
	// in a turn and keeps it for later.
	Accepted bool `json:"accepted,omitempty"`
	Queued   bool `json:"queued,omitempty"`
}

func messageRoute(mux *http.ServeMux, b Backend) {
	m, ok := b.(Messenger)
	if !ok {
		return
	}
	mux.HandleFunc("POST /v1/sessions/{ref}/message", func(w http.ResponseWriter, r *http.Request) {
		var req MessageRequest
		if err := decodeLimit(r, &req, 6*message.MaxBytes+1<<10); err != nil { // each byte escaped (\u00XX) at worst
			writeErr(w, err)
			return
		}
		res, err := m.SendMessage(r.Context(), r.PathValue("ref"), req)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, 200, res)
	})
}

// SendMessage calls POST /v1/sessions/{ref}/message.
func (c *Client) SendMessage(ctx context.Context, ref string, req MessageRequest) (MessageResult, error) {
	var res MessageResult
	return res, c.do(ctx, "POST", "/v1/sessions/"+url.PathEscape(ref)+"/message", req, &res)
}
