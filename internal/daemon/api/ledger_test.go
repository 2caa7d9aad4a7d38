package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/sessions/ledger"
)

// ledgerOnly is a Backend with nothing but a ledger (any other call
// would panic on the nil embedded Backend).
type ledgerOnly struct {
	Backend
	asked []string
}

func (l *ledgerOnly) Ledger(_ context.Context, ref string, o LedgerOptions) (LedgerResult, error) {
	l.asked = append(l.asked, fmt.Sprintf("%s %v", ref, o.WithTranscript))
	if ref == "gone" {
		return LedgerResult{}, fmt.Errorf("no session %q: %w", ref, errdefs.ErrNotFound)
	}
	return LedgerResult{Records: []ledger.Record{{V: ledger.Version, Seq: 1, Time: time.Unix(1, 0).UTC(), Kind: ledger.KindRequest, RequestID: "req_1"}},
		Transcript: &TranscriptRead{Path: "/home/t.jsonl", Lines: 3, Skipped: 1, Problems: []string{"line 2: not JSON (at byte 1)"}}}, nil
}

func TestLedgerRoute(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	b := &ledgerOnly{}
	mux := http.NewServeMux()
	ledgerRoute(mux, b)
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Close()
	c := NewClient(sock)
	ctx := context.Background()

	res, err := c.Ledger(ctx, "a b", LedgerOptions{WithTranscript: true})
	if err != nil || len(res.Records) != 1 || res.Records[0].RequestID != "req_1" || res.Transcript == nil || res.Transcript.Skipped != 1 {
		t.Fatalf("%v %+v", err, res)
	}
	if _, err := c.Ledger(ctx, "plain", LedgerOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ledger(ctx, "gone", LedgerOptions{}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("an unknown session: %v", err)
	}
	var out any
	if err := c.get(ctx, "/v1/sessions/x/ledger?transcript=maybe", &out); !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), `transcript="maybe"`) {
		t.Fatalf("a bad transcript=: %v", err)
	}
	if got := strings.Join(b.asked, ","); got != "a b true,plain false,gone false" {
		t.Fatalf("asked: %s", got)
	}
	// A Backend without the feature has no route.
	bare := http.NewServeMux()
	ledgerRoute(bare, struct{ Backend }{})
	req, _ := http.NewRequest("GET", "http://paddock/v1/sessions/x/ledger", nil)
	if _, pattern := bare.Handler(req); pattern != "" {
		t.Fatalf("a route without a ledger: %q", pattern)
	}
}
