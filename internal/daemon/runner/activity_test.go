package runner

import (
	"bufio"
	"errors"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/sessions/activity"
)

func TestParsePane(t *testing.T) {
	for _, c := range []struct {
		out  string
		code int
		dead bool
		want activity.Exit
	}{
		{"0||\n", 0, false, activity.Exit{}},
		{"1|0|\n", 0, true, activity.Exit{Status: 0}},
		{"1|1|\n", 0, true, activity.Exit{Status: 1}},
		{"1||KILL\n", 0, true, activity.Exit{Status: -1, Signal: 9}},
		{"1||9\n", 0, true, activity.Exit{Status: -1, Signal: 9}},
		{"1||SIGTERM\n", 0, true, activity.Exit{Status: -1, Signal: 15}},
		{"no server running on /tmp/tmux-1000/paddock\n", 1, true, activity.Exit{Status: -1, Gone: true}},
		{"can't find session: claude\n", 1, true, activity.Exit{Status: -1, Gone: true}},
		{"something odd\n", 1, false, activity.Exit{}},
		{"garbage", 0, false, activity.Exit{}},
		{"0|||42\n", 0, false, activity.Exit{}},
		{"1|0||42\n", 0, true, activity.Exit{Status: 0}},
		{"0||9|42\n", 0, true, activity.Exit{Status: -1, Signal: 9}},
		{"0|2||42\n", 0, true, activity.Exit{Status: 2}},
	} {
		got, dead := parsePane(c.out, c.code)
		if dead != c.dead || got != c.want {
			t.Errorf("parsePane(%q, %d) = %+v %v, want %+v %v", c.out, c.code, got, dead, c.want, c.dead)
		}
	}
}

// TestWithRecordedExit: what claude's wrapper recorded completes tmux's
// view: it says claude ended while tmux still shows the wrapper, and it
// turns 128+n into the signal n.
func TestWithRecordedExit(t *testing.T) {
	for _, c := range []struct {
		tmux     activity.Exit
		dead     bool
		recorded string
		want     activity.Exit
		wantDead bool
	}{
		{activity.Exit{}, false, "", activity.Exit{}, false},                                                // alive, nothing recorded
		{activity.Exit{}, false, "137\n", activity.Exit{Status: -1, Signal: 9}, true},                       // ended; the wrapper still exiting
		{activity.Exit{Status: -1}, true, "0\n", activity.Exit{Status: 0}, true},                            // tmux lost the status
		{activity.Exit{Status: -1, Gone: true}, true, "1\n", activity.Exit{Status: 1}, true},                // tmux gone, status known
		{activity.Exit{Status: 137}, true, "", activity.Exit{Status: -1, Signal: 9}, true},                  // the wrapper passed SIGKILL on
		{activity.Exit{Status: 2}, true, "", activity.Exit{Status: 2}, true},                                // a plain status
		{activity.Exit{Status: -1}, true, "garbage", activity.Exit{Status: -1}, true},                       // the box wrote nonsense
		{activity.Exit{Status: -1}, true, "99999", activity.Exit{Status: -1}, true},                         // out of range
		{activity.Exit{Status: -1, Signal: 15}, true, "143\n", activity.Exit{Status: -1, Signal: 15}, true}, // agree
	} {
		got, dead := withRecordedExit(c.tmux, c.dead, c.recorded)
		if got != c.want || dead != c.wantDead {
			t.Errorf("withRecordedExit(%+v, %v, %q) = %+v %v, want %+v %v", c.tmux, c.dead, c.recorded, got, dead, c.want, c.wantDead)
		}
	}
}

func TestReadLineBounded(t *testing.T) {
	br := bufio.NewReaderSize(strings.NewReader("short\n"+strings.Repeat("x", 5000)+"\n"), 64)
	if l, err := readLine(br, 1024); err != nil || string(l) != "short" {
		t.Fatalf("%q %v", l, err)
	}
	if _, err := readLine(br, 1024); !errors.Is(err, bufio.ErrBufferFull) {
		t.Fatalf("a 5000-byte line: %v", err)
	}
}
