package perf

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestPct(t *testing.T) {
	s := []time.Duration{5, 1, 4, 2, 3}
	if Pct(s, 0.5) != 3 || Pct(s, 0) != 1 || Pct(s, 0.99) != 5 || Pct(nil, 0.5) != 0 {
		t.Fatal(Pct(s, 0.5), Pct(s, 0.99))
	}
	if s[0] != 5 {
		t.Fatal("Pct sorted the caller's slice")
	}
}

func TestTable(t *testing.T) {
	var b bytes.Buffer
	tb := Table{Title: "x", Header: []string{"a", "bbb"}}
	tb.Add("long cell", "1")
	tb.Write(&b)
	if !strings.Contains(b.String(), "| a         | bbb |") || !strings.Contains(b.String(), "| long cell | 1   |") {
		t.Fatal(b.String())
	}
}
