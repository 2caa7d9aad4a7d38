package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/config"
	"github.com/paddockhq/paddock/internal/daemon/statedir"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
	"github.com/paddockhq/paddock/internal/sessions/ledger"
	"github.com/paddockhq/paddock/internal/sessions/limits"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// TestLogRetentionKeepsBudget: a session's decision log capped by
// logs.max_size is rotated and its oldest parts dropped, yet the tokens
// its budget and its owner's day count are the same after a Runner
// restart; logs and the ledger read the rotated parts still kept, in order.
func TestLogRetentionKeepsBudget(t *testing.T) {
	const maxSize = 64 << 10
	cfg := config.Default()
	cfg.Proxy.Listen, cfg.Web.Listen = "off", "off"
	cfg.Logs.MaxSize = maxSize
	cfg.Users.TokensPerDay = 1 << 40 // so that a start reads the day's usage back
	dir := filepath.Join(t.TempDir(), "state")
	open := func() *Runner {
		t.Helper()
		r, err := New(Options{StateDir: dir, Config: cfg, Backends: map[string]sandbox.Backend{"local": proxyOnly{}}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := open()
	s := session.Session{ID: "0123456789abcdef", Name: "kept", Backend: "local", Limits: limits.Limits{TokenBudget: 1 << 30}}
	if err := r.save(&s); err != nil {
		t.Fatal(err)
	}
	s, err := r.Session(context.Background(), "kept")
	if err != nil {
		t.Fatal(err)
	}
	// What the credential proxy and the egress proxy would write: 2000
	// requests of 10 tokens, an egress line every tenth.
	const n = 2000
	now := time.Now().UTC()
	for i := range n {
		r.decisions.Record(decisionlog.Entry{Time: now.Add(time.Duration(i-n) * time.Millisecond), Session: s.ID,
			RequestID: fmt.Sprintf("req_%05d", i), Method: "POST", Path: "/v1/messages", Decision: "forwarded",
			Status: 200, Model: "claude-x", InputTokens: 7, OutputTokens: 3})
		if i%10 == 0 {
			r.decisions.Record(decisionlog.Entry{Time: now.Add(time.Duration(i-n) * time.Millisecond), Kind: "egress",
				Session: s.ID, RequestID: fmt.Sprintf("eg_%05d", i), Method: "CONNECT", Decision: "allowed", Host: "example.org", Port: 443})
		}
	}
	if err := r.decisions.Sweep(s.ID); err != nil {
		t.Fatal(err)
	}
	var size int64
	names, _ := filepath.Glob(filepath.Join(dir, statedir.LogsDir, s.ID+".jsonl*"))
	for _, p := range names {
		fi, _ := os.Stat(p)
		size += fi.Size()
	}
	if size > maxSize+maxSize/4 || len(names) < 2 {
		t.Fatalf("the log is %d bytes in %d files, cap %d", size, len(names), maxSize)
	}
	kept, err := r.Logs(context.Background(), "kept", 0)
	if err != nil || len(kept) == 0 || len(kept) >= n || kept[len(kept)-1].RequestID != fmt.Sprintf("req_%05d", n-1) {
		t.Fatalf("logs: %v, %d lines", err, len(kept))
	}
	r.trackLimits(&s)
	if got := r.usage.Used(s.ID); got != n*10 {
		t.Fatalf("the budget counts %d tokens, want %d", got, n*10)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	// A restart: the same totals, read back from the carry and the parts.
	r = open()
	defer r.Close()
	s.Limits.TokenBudget = n * 10
	r.trackLimits(&s)
	if got := r.usage.Used(s.ID); got != n*10 {
		t.Fatalf("after a restart the budget counts %d tokens, want %d", got, n*10)
	}
	if _, why := r.usage.Admit(s.ID); !strings.Contains(why, fmt.Sprintf("(%d of %d tokens)", n*10, n*10)) {
		t.Fatalf("a session at its budget after a restart: %q", why)
	}
	if got := r.userUsage.UsedToday(s.Owner.Name); got != n*10 {
		t.Fatalf("after a restart %s's day counts %d tokens, want %d", s.Owner.Name, got, n*10)
	}

	// The ledger reads what logs reads, egress lines included, in order.
	res, err := r.Ledger(context.Background(), "kept", api.LedgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != len(kept) || res.Records[0].Seq != 1 || res.Records[len(kept)-1].RequestID != kept[len(kept)-1].RequestID {
		t.Fatalf("%d records for %d lines", len(res.Records), len(kept))
	}
	egress := 0
	for _, rec := range res.Records {
		if rec.Kind == ledger.KindEgress {
			egress++
		}
	}
	if egress == 0 || res.Transcript != nil {
		t.Fatalf("%d egress records, transcript %+v", egress, res.Transcript)
	}
	// The transcript is read through a running box only.
	if _, err := r.Ledger(context.Background(), "kept", api.LedgerOptions{WithTranscript: true}); !errdefs.Is(err, errdefs.ErrConflict) ||
		!strings.Contains(err.Error(), "wake it (paddock wake kept)") {
		t.Fatalf("the transcript of a session that does not run: %v", err)
	}
}
