package credproxy

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/proxy/anthropic"
	"github.com/paddockhq/paddock/internal/proxy/credproxy/h1"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
)

// finish completes the entry and has it recorded. Under paddock's Server
// that happens once the response is sent (h1.AfterResponder), so the
// response is not held up by summarizing the body or writing the logs: on
// the connection's goroutine, or for a large body on one of its own;
// under any other server, at once. Records may therefore be written out of
// the order their requests ended in; each carries its time.
func (p *Proxy) finish(st *reqState, w http.ResponseWriter, r *http.Request, start time.Time) {
	if s := st.stream; s != nil {
		// The upstream write is over (RoundTrip and the answer's Close wait
		// for it): what came is the handler's.
		s.disarm()
		s.clearAbort()
		st.body, st.stream = s.data, nil
		st.entry.BytesIn = int64(len(st.body))
	}
	if st.cw != nil {
		st.entry.BytesOut = st.cw.n
		if st.entry.Status == 0 {
			st.entry.Status = st.cw.status
		}
		switch {
		case st.entry.Reason != "":
		case st.tap != nil && st.tap.idled.Load():
			st.entry.Reason = "the upstream sent nothing for " + p.opts.StreamIdleTimeout.String() + "; response cut"
		case st.tap != nil && st.tap.stalled.Load():
			st.entry.Reason = "the client read nothing for " + p.opts.StreamIdleTimeout.String() + "; connection closed"
		case r.Context().Err() != nil && !st.answered:
			st.entry.Reason = "client went away"
		}
	}
	st.entry.DurationMS = float64(time.Since(start).Microseconds()) / 1000
	p.pendMu.Lock()
	p.pending++
	p.pendMu.Unlock()
	if ar, ok := w.(h1.AfterResponder); ok {
		if len(st.body) >= recordAsideMin {
			// Summarizing a large body takes about a millisecond a
			// megabyte: on a goroutine of its own, so that the connection
			// reads its next request meanwhile.
			ar.AfterResponse(func() { go p.recordNow(st) })
			return
		}
		ar.AfterResponse(func() { p.recordNow(st) })
		return
	}
	p.recordNow(st)
}

// recordAsideMin is the body size from which a request is recorded off
// its connection's goroutine. Below it, waking another goroutine costs
// more than the record (see docs/PERFORMANCE.md).
const recordAsideMin = 64 << 10

// recordNow records one request that finish counted as pending.
func (p *Proxy) recordNow(st *reqState) {
	p.record(st)
	p.putBuf(st.buf)
	p.pendMu.Lock()
	if p.pending--; p.pending == 0 {
		p.pendC.Broadcast()
	}
	p.pendMu.Unlock()
}

// Drain waits until every request finished so far has been recorded.
func (p *Proxy) Drain() {
	p.pendMu.Lock()
	for p.pending > 0 {
		p.pendC.Wait()
	}
	p.pendMu.Unlock()
}

func (p *Proxy) record(st *reqState) {
	e := &st.entry
	if e.Decision == decisionlog.Forwarded {
		sum := anthropic.Summarize(st.body)
		e.Model, e.Stream, e.ToolResultIDs = sum.Model, sum.Stream, sum.ToolResultIDs
		if st.scanner != nil {
			st.scanner.Close()
			if st.scanner.Model != "" {
				e.Model = st.scanner.Model
			}
			e.MessageID, e.ToolUseIDs = st.scanner.MessageID, st.scanner.ToolUseIDs
			u := st.scanner.Usage
			e.InputTokens, e.OutputTokens = u.InputTokens, u.OutputTokens
			e.CacheReadTokens, e.CacheCreationTokens = u.CacheReadInputTokens, u.CacheCreationInputTokens
		}
	}
	st.body = nil
	if p.opts.Limits != nil && e.Session != "" {
		if ea, ok := p.opts.Limits.(EntryAccounter); ok {
			ea.AccountEntry(e)
		} else {
			p.opts.Limits.Account(e.Session, e.InputTokens+e.OutputTokens)
		}
	}
	decisionlog.Clamp(e) // before the log line below too: the model and ids are the box's
	p.decisions.Record(*e)
	// The decision log holds every request; the Runner's log repeats the
	// ordinary ones at debug level only, and what went wrong above it.
	level := slog.LevelDebug
	switch {
	case e.Decision == decisionlog.Refused || e.Status >= 500:
		level = slog.LevelWarn
	case e.Status >= 400 || e.Reason != "" || st.upErr != nil:
		level = slog.LevelInfo
	}
	if !p.log.Enabled(context.Background(), level) {
		return
	}
	attrs := []slog.Attr{
		slog.String(logkey.Decision, string(e.Decision)), slog.String(logkey.Session, e.Session),
		slog.String(logkey.RequestID, e.RequestID), slog.String(logkey.Method, e.Method),
		slog.String(logkey.Path, e.Path), slog.Int(logkey.Status, e.Status),
		slog.Int64(logkey.BytesIn, e.BytesIn), slog.Int64(logkey.BytesOut, e.BytesOut),
		slog.Float64(logkey.Duration, e.DurationMS),
	}
	if e.Reason != "" {
		attrs = append(attrs, slog.String(logkey.Reason, e.Reason))
	}
	if e.Model != "" {
		attrs = append(attrs, slog.String(logkey.Model, e.Model),
			slog.Int64(logkey.InputTok, e.InputTokens), slog.Int64(logkey.OutputTok, e.OutputTokens))
	}
	if st.upErr != nil {
		attrs = append(attrs, slog.String(logkey.Error, st.upErr.Error()))
	}
	p.log.LogAttrs(context.Background(), level, "proxy decision", attrs...)
}
