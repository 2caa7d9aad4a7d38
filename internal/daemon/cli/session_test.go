package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/sessions/claudecode"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// TestSessionAndResumeHostUsage: mistakes in export, import and
// --resume-host are said before any Runner is asked (there is none here).
func TestSessionAndResumeHostUsage(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.paddock")
	os.WriteFile(bad, []byte("not a session file"), 0o600)
	home := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--state-dir", dir, "session", "import", bad}, 2, "nothing was imported"},
		{[]string{"--state-dir", dir, "session", "import", filepath.Join(dir, "missing")}, 2, "open the session file"},
		{[]string{"--state-dir", dir, "session", "import", "-"}, 2, "it is empty"},
		{[]string{"--state-dir", dir, "session", "export"}, 1, "accepts 1 arg"},
		{[]string{"--state-dir", dir, "run", "--resume-host", "not-an-id"}, 2, "not a UUID"},
		{[]string{"--state-dir", dir, "run", "--resume-host=../../etc/passwd"}, 2, "not a UUID"},
		{[]string{"--state-dir", dir, "run", "stray"}, 2, "run takes no arguments but --resume-host's id"},
		{[]string{"--state-dir", dir, "run", "--resume-host", "a", "b"}, 2, "run takes no arguments"},
		{[]string{"--state-dir", dir, "run", "--workspace", dir, "--resume-host"}, 4, "no conversation of Claude Code"},
		{[]string{"--state-dir", dir, "run", "--workspace", dir, "--resume-host", "0b6c1a52-3f0e-4d6b-9a51-2f1d7c3e4a10"}, 4, "no conversation"},
	} {
		code, _, stderr := run(t, "", []string{"HOME=" + home}, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.msg) {
			t.Errorf("%v: code %d stderr %q; want %d and %q", tc.args, code, stderr, tc.code, tc.msg)
		}
	}
}

// TestResumeHostUnderSudo: run as root through sudo, --resume-host reads
// only the invoking person's files: a conversation of another uid is
// refused before any Runner is asked; once it is theirs it is read (and
// the command goes on to the Runner, which is not there).
func TestResumeHostUnderSudo(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: sudo's SUDO_UID is only believed by root")
	}
	dir, home, ws := t.TempDir(), t.TempDir(), t.TempDir()
	cfg := filepath.Join(home, ".claude")
	tx := filepath.Join(cfg, "projects", claudecode.ProjectDirName(ws), "0b6c1a52-3f0e-4d6b-9a51-2f1d7c3e4a10.jsonl")
	if err := os.MkdirAll(filepath.Dir(tx), 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(tx, []byte(`{"type":"user","message":{"content":"hi"}}`+"\n"), 0o600)
	env := []string{"HOME=/root", "SUDO_USER=nobody", "SUDO_UID=65534"}
	args := []string{"--state-dir", dir, "run", "-d", "--no-git-identity", "--claude-config", cfg, "--workspace", ws, "--resume-host"}
	code, _, stderr := run(t, "", env, args...)
	if code != 4 || !strings.Contains(stderr, "does not belong to uid 65534") {
		t.Fatalf("root's files under sudo: code %d %s", code, stderr)
	}
	filepath.WalkDir(cfg, func(p string, _ os.DirEntry, _ error) error { return os.Lchown(p, 65534, 65534) })
	code, _, stderr = run(t, "", env, args...)
	if code != 3 || !strings.Contains(stderr, "continuing conversation 0b6c1a52") {
		t.Fatalf("the person's own files: code %d %s", code, stderr)
	}
}

func TestBranchText(t *testing.T) {
	for _, c := range []struct {
		c    *session.Clone
		want string
	}{
		{nil, "-"},
		{&session.Clone{Branch: "paddock/a"}, "paddock/a"},
		{&session.Clone{Branch: "paddock/a", Head: "h", Ahead: 3}, "paddock/a +3"},
		{&session.Clone{Branch: "paddock/a", Head: "h", Ahead: 3, Dirty: true, Fetched: "h"}, "paddock/a +3* fetched"},
		{&session.Clone{Branch: "f/x", Head: "h", Ahead: 1, Fetched: "h", Merged: "h"}, "f/x +1 merged"},
		{&session.Clone{Branch: "f/x", Head: "h2", Ahead: 2, Merged: "h1"}, "f/x +2"},
	} {
		if got := branchText(c.c); got != c.want {
			t.Errorf("branchText(%+v) = %q, want %q", c.c, got, c.want)
		}
	}
}
