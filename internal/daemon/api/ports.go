package api

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// PortRequest asks to publish box port Box on the host's loopback port
// Host (0: a free one).
type PortRequest struct {
	Box  int `json:"box"`
	Host int `json:"host,omitempty"`
}

// Check refuses ports that are not TCP ports, and host ports below 1024
// (the Runner may run as root; a published port never takes a system
// service's place).
func (p PortRequest) Check() error {
	if p.Box < 1 || p.Box > 65535 {
		return fmt.Errorf("box port %d is not a TCP port (1-65535): %w", p.Box, errdefs.ErrInvalid)
	}
	if p.Host != 0 && (p.Host < 1024 || p.Host > 65535) {
		return fmt.Errorf("host port %d is not one paddock opens: give one from 1024 to 65535, or none for a free one: %w", p.Host, errdefs.ErrInvalid)
	}
	return nil
}

// PortPublisher is the optional Backend feature behind /v1/sessions/{ref}/ports
// (paddock port): a session's box ports published on the host's loopback.
type PortPublisher interface {
	// Ports lists the session's published ports, each saying whether its
	// host port is open now.
	Ports(ctx context.Context, ref string) ([]session.Port, error)
	Publish(ctx context.Context, ref string, req PortRequest) (session.Session, error)
	Unpublish(ctx context.Context, ref string, box int) (session.Session, error)
}

// PortDialer connects to a published box port of a running session (the
// web page's previews); not on the socket API.
type PortDialer interface {
	DialPort(ctx context.Context, ref string, box int) (net.Conn, error)
}

// portRoutes adds the PortPublisher's routes when b has it.
func portRoutes(b Backend, one func(pattern string, f func(r *http.Request) (any, error))) {
	p, ok := b.(PortPublisher)
	if !ok {
		return
	}
	one("GET /v1/sessions/{ref}/ports", func(r *http.Request) (any, error) {
		ps, err := p.Ports(r.Context(), r.PathValue("ref"))
		if ps == nil {
			ps = []session.Port{}
		}
		return ps, err
	})
	one("POST /v1/sessions/{ref}/ports", func(r *http.Request) (any, error) {
		var req PortRequest
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		return p.Publish(r.Context(), r.PathValue("ref"), req)
	})
	one("DELETE /v1/sessions/{ref}/ports/{box}", func(r *http.Request) (any, error) {
		box, err := strconv.Atoi(r.PathValue("box"))
		if err != nil {
			return nil, fmt.Errorf("box port %q is not a number: %w", r.PathValue("box"), errdefs.ErrInvalid)
		}
		return p.Unpublish(r.Context(), r.PathValue("ref"), box)
	})
}

// Ports calls GET /v1/sessions/{ref}/ports.
func (c *Client) Ports(ctx context.Context, ref string) ([]session.Port, error) {
	var ps []session.Port
	return ps, c.do(ctx, "GET", "/v1/sessions/"+url.PathEscape(ref)+"/ports", nil, &ps)
}

// Publish calls POST /v1/sessions/{ref}/ports.
func (c *Client) Publish(ctx context.Context, ref string, req PortRequest) (session.Session, error) {
	var s session.Session
	return s, c.do(ctx, "POST", "/v1/sessions/"+url.PathEscape(ref)+"/ports", req, &s)
}

// Unpublish calls DELETE /v1/sessions/{ref}/ports/{box}.
func (c *Client) Unpublish(ctx context.Context, ref string, box int) (session.Session, error) {
	var s session.Session
	return s, c.do(ctx, "DELETE", "/v1/sessions/"+url.PathEscape(ref)+"/ports/"+strconv.Itoa(box), nil, &s)
}
