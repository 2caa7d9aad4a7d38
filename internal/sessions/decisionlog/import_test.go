package decisionlog

import (
	"errors"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

func TestImport(t *testing.T) {
	d, err := OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	es := []Entry{{Time: at, Session: "old", RequestID: "r1", InputTokens: 5, OutputTokens: 1}, {Time: at.Add(time.Second), RequestID: "r2", OutputTokens: 2}}
	carry := &Carry{Version: CarryVersion, Through: 7, Totals: Totals{InputTokens: 100}}
	if err := d.Import("s1", es, carry); err != nil {
		t.Fatal(err)
	}
	l, err := d.ReadLog("s1")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Entries) != 2 || l.Entries[0].Session != "s1" || l.Entries[1].RequestID != "r2" {
		t.Fatalf("entries: %+v", l.Entries)
	}
	if l.Tokens() != 108 || l.Carried.Through != 0 {
		t.Fatalf("tokens %d, carry %+v", l.Tokens(), l.Carried)
	}
	// Recording goes on after the imported lines.
	d.Record(Entry{Time: at.Add(time.Minute), Session: "s1", RequestID: "r3"})
	if got, _ := d.Read("s1", 0); len(got) != 3 {
		t.Fatalf("after a record: %d entries", len(got))
	}
	if err := d.Import("s1", es, nil); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("second import: %v", err)
	}
	if err := d.Import("../x", es, nil); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("bad id: %v", err)
	}
}
