package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/sessions/events"
)

// Eventer is the optional Backend feature behind
//
//	GET /v1/events                  every session the caller sees
//	GET /v1/sessions/{ref}/events   one session
//
// streams of server-sent events (text/event-stream): each event's id is
// its Seq, its event field its Type and its data the events.Event as
// JSON. A client that reconnects with Last-Event-ID (or ?after=SEQ) gets
// what it missed while the Runner still keeps it; a first event of type
// "lagged" says some was lost. A comment line every Heartbeat keeps
// proxies from closing an idle stream.
type Eventer interface {
	// Events subscribes to the events of the session ref ("" for all
	// the caller may see) after the given Seq. The channel closes when
	// ctx ends or the stream is cut off; err then says why.
	Events(ctx context.Context, ref string, after uint64) (Stream, error)
}

// Stream is a subscription as the API serves it.
type Stream struct {
	C      <-chan events.Event
	Lagged bool
	// Err is why C closed early (nil when ctx ended).
	Err   func() error
	Close func()
}

// Heartbeat is how often an idle event stream gets a comment line.
const Heartbeat = 15 * time.Second

func eventRoutes(mux *http.ServeMux, b Backend) {
	ev, ok := b.(Eventer)
	if !ok {
		return
	}
	mux.HandleFunc("GET /v1/events", func(w http.ResponseWriter, r *http.Request) { ServeEvents(w, r, ev, "") })
	mux.HandleFunc("GET /v1/sessions/{ref}/events", func(w http.ResponseWriter, r *http.Request) {
		ServeEvents(w, r, ev, r.PathValue("ref"))
	})
}

// ServeEvents answers r with the event stream of the session ref ("" for
// every session the caller sees), as Eventer describes it, until r's
// context ends or the stream is cut off. The web page serves its own
// stream with it, behind its own login.
func ServeEvents(w http.ResponseWriter, r *http.Request, ev Eventer, ref string) {
	after, err := afterOf(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	st, err := ev.Events(r.Context(), ref, after)
	if err != nil {
		writeErr(w, err)
		return
	}
	defer st.Close()
	fl, _ := w.(http.Flusher)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(200)
	if st.Lagged {
		fmt.Fprint(w, "event: lagged\ndata: {\"error\":\"some events were no longer kept\"}\n\n")
	} else {
		fmt.Fprint(w, ": stream open\n\n")
	}
	if fl != nil {
		fl.Flush()
	}
	tick := time.NewTicker(Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
			fmt.Fprint(w, ": keep-alive\n\n")
		case e, ok := <-st.C:
			if !ok {
				msg := "the event stream ended"
				if err := st.Err(); err != nil {
					msg = err.Error()
				}
				b, _ := json.Marshal(errorBody{Error: msg, Kind: "unavailable"})
				fmt.Fprintf(w, "event: error\ndata: %s\n\n", b)
				return
			}
			b, err := json.Marshal(e)
			if err != nil {
				continue
			}
			fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Type, b)
		}
		if fl != nil {
			fl.Flush()
		}
	}
}

// afterOf is the Seq a client asks to resume after: Last-Event-ID, or
// ?after=.
func afterOf(r *http.Request) (uint64, error) {
	v := r.Header.Get("Last-Event-ID")
	if q := r.URL.Query().Get("after"); q != "" {
		v = q
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("the last event id %q is not an event's number: %w", v, errdefs.ErrInvalid)
	}
	return n, nil
}

// maxEventLine bounds one line of an event stream as ReadEvents reads it.
const maxEventLine = 1 << 20

// ReadEvents reads a server-sent event stream from r, calling fn for each
// event until fn returns false, r ends, or an "error" event comes (its
// message is the error returned).
func ReadEvents(r io.Reader, fn func(events.Event) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventLine)
	var typ, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data == "" {
				typ = ""
				continue
			}
			switch typ {
			case "error":
				var eb errorBody
				_ = json.Unmarshal([]byte(data), &eb)
				return fmt.Errorf("%s: %w", eb.Error, kindToErr(eb.Kind))
			case "lagged":
			default:
				var e events.Event
				if err := json.Unmarshal([]byte(data), &e); err != nil {
					return fmt.Errorf("an event that is not JSON: %w", err)
				}
				if !fn(e) {
					return nil
				}
			}
			typ, data = "", ""
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event:"):
			typ = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			d := strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")
			if data != "" {
				data += "\n"
			}
			data += d
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF
}

func kindToErr(kind string) error {
	if e, ok := kindErr[kind]; ok {
		return e
	}
	return errdefs.ErrUnavailable
}

// Events calls GET /v1/events (ref "") or GET /v1/sessions/{ref}/events
// and calls fn for each event until fn returns false or ctx ends.
func (c *Client) Events(ctx context.Context, ref string, after uint64, fn func(events.Event) bool) error {
	p := "/v1/events"
	if ref != "" {
		p = "/v1/sessions/" + url.PathEscape(ref) + "/events"
	}
	if after > 0 {
		p += "?after=" + strconv.FormatUint(after, 10)
	}
	resp, err := c.getOK(ctx, p)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	err = ReadEvents(resp.Body, fn)
	if ctx.Err() != nil && (err == nil || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, context.Canceled)) {
		return ctx.Err()
	}
	return err
}

// Recheck is how often a long answer (an event stream, a followed audit
// log, a long wait) checks again that the login or token it was opened
// with still holds.
const Recheck = 2 * time.Second

// WhileAllowed returns a context that ends with ctx, or as soon as
// allowed, asked every interval, says no: the web page's login and the
// API tokens end the long answers of a login logged out, a token revoked,
// or a person taken out of the Runner's group.
func WhileAllowed(ctx context.Context, interval time.Duration, allowed func() bool) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if !allowed() {
					cancel()
					return
				}
			}
		}
	}()
	return ctx, cancel
}
