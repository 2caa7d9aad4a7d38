package cli

import (
	"strings"
	"testing"
)

func TestLedgerFlags(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"ledger"}, 1, "accepts 1 arg"},
		{[]string{"--state-dir", dir, "ledger", "x", "--format", "xml"}, 2, `--format: format "xml": use jsonl or csv`},
		{[]string{"--state-dir", dir, "ledger", "x"}, 3, "paddock serve"}, // no Runner: unavailable
	} {
		code, _, stderr := run(t, "", nil, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, tc.code, tc.msg)
		}
	}
}
