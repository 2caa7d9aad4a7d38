package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/sandbox/sandboxtest"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/cli"
	"github.com/paddockhq/paddock/internal/sessions/portable"
	"github.com/paddockhq/paddock/internal/sessions/session"
	"github.com/paddockhq/paddock/internal/testkit/fakeapi"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// fileHolds reports whether the session file, unpacked, holds s.
func fileHolds(t *testing.T, file, s string) bool {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Contains(b, []byte(s))
}

// resumed waits for an imported session's claude to show the history
// (--resume redraws it) and its prompt, then has one more turn, which
// the fake numbers by the user messages it carries: turn must appear.
func (e *env) resumed(name, history, turn string) {
	e.t.Helper()
	e.waitScreen(name, history, 60*time.Second)
	e.waitScreen(name, promptReady, 30*time.Second)
	e.typeLine(name, "and on")
	e.waitScreen(name, turn, 60*time.Second)
}

// TestPortableSessionMoves: a conversation moves with the real CLI, from
// one Runner to a second (another state directory) and across backends,
// local → docker (exported while it runs), local → local (exported
// asleep) and docker → local (the moved one moved on), and --resume shows
// its history there: the next turn counts the earlier ones. Its decision
// log moves with it; no token is ever in a file; each export and import
// is audited.
func TestPortableSessionMoves(t *testing.T) {
	e1 := newEnv(t)
	e2 := newEnv(t)
	dir := t.TempDir()
	_, tok := e1.chat("mover", "local")
	e1.waitTranscript("mover", "hi from the fake server (turn 1)") // the turn written, not only drawn

	// Running, local → a second Runner, docker.
	running := filepath.Join(dir, "running.paddock")
	_, errs, code := e1.pdRun("session", "export", "mover", "-o", running)
	if code != 0 {
		t.Fatalf("export: %d %s", code, errs)
	}
	if !strings.Contains(errs, "exported to") {
		t.Fatalf("export said: %s", errs)
	}
	if fileHolds(t, running, tok) || fileHolds(t, running, "pdk_st_") || fileHolds(t, running, ownerToken) {
		t.Fatal("the session file holds a token")
	}
	out, errs, code := e2.pdRun("session", "import", running, "--backend", "docker", "--name", "moved-docker")
	if code != 0 {
		t.Fatalf("import: %d %s%s", code, out, errs)
	}
	e2.resumed("moved-docker", "hi from the fake server (turn 1)", "hi from the fake server (turn 2)")
	// The decision log came along: what the first Runner logged, and the new turn's.
	before := strings.Count(e1.pd("logs", "mover"), "forwarded")
	if after := strings.Count(e2.pd("logs", "moved-docker"), "forwarded"); before == 0 || after <= before {
		t.Fatalf("the decision log did not move with it: %d forwarded requests before, %d after a turn more", before, after)
	}

	// Asleep, local → the second Runner, local.
	e1.pd("sleep", "mover")
	asleep := filepath.Join(dir, "asleep.paddock")
	if _, errs, code := e1.pdRun("session", "export", "mover", "-o", asleep); code != 0 {
		t.Fatalf("export asleep: %d %s", code, errs)
	}
	var s session.Session
	if err := json.Unmarshal([]byte(e1.pd("inspect", "mover")), &s); err == nil && s.Observed != session.Asleep {
		t.Fatalf("export woke the session: %s", s.Observed)
	}
	e2.pd("session", "import", asleep, "--backend", "local", "--name", "moved-local")
	e2.resumed("moved-local", "hi from the fake server (turn 1)", "hi from the fake server (turn 2)")

	// Docker → back to the first Runner, local: the two turns come along.
	again := filepath.Join(dir, "again.paddock")
	e2.pd("session", "export", "moved-docker", "-o", again)
	e1.pd("session", "import", again, "--backend", "local", "--name", "back")
	e1.resumed("back", "hi from the fake server (turn 2)", "hi from the fake server (turn 3)")

	if a := e1.pd("audit"); !strings.Contains(a, "export") || !strings.Contains(a, "import") {
		t.Fatalf("first Runner's audit:\n%s", a)
	}
	if a := e2.pd("audit"); !strings.Contains(a, "import") || !strings.Contains(a, "export") {
		t.Fatalf("second Runner's audit:\n%s", a)
	}
}

// TestPortableHostileImport: through the CLI, a damaged or hostile file
// is refused with exit 2 and nothing is made: no session, no object on
// any backend, no file in the state directory.
func TestPortableHostileImport(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	e.chat("src", "local")
	e.waitTranscript("src", "hi from the fake server (turn 1)")
	good := filepath.Join(dir, "good.paddock")
	e.pd("session", "export", "src", "-o", good)
	e.pd("rm", "-f", "src")
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(must(gzip.NewReader(bytes.NewReader(b))))
	if err != nil {
		t.Fatal(err)
	}
	regz := func(p []byte) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(p)
		zw.Close()
		return buf.Bytes()
	}
	// A path in the tar stream turned into a traversal of the same length.
	i := bytes.Index(raw, []byte("claude/projects/"))
	if i < 0 {
		t.Fatal("no transcript in the export")
	}
	traversal := append([]byte(nil), raw...)
	copy(traversal[i:], "claude/../../../")
	altered := bytes.Replace(raw, []byte("hi from the fake server"), []byte("HI FROM THE FAKE SERVER"), 1)
	if bytes.Equal(altered, raw) {
		t.Fatal("no answer in the exported transcript to alter")
	}
	cases := map[string][]byte{
		"truncated":   b[:len(b)/2],
		"not gzip":    []byte("hello"),
		"altered":     regz(altered),
		"traversal":   regz(traversal),
		"trailing":    append(append([]byte(nil), b...), []byte("and some more bytes to make a header")...),
		"tar garbage": regz(append(append([]byte(nil), raw...), bytes.Repeat([]byte("x"), 4096)...)),
	}
	list := func() string {
		var names []string
		filepath.WalkDir(e.dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && !strings.HasSuffix(p, "audit.jsonl") && !strings.Contains(p, "docker-view") {
				names = append(names, p)
			}
			return nil
		})
		return strings.Join(names, "\n")
	}
	before := list()
	for name, file := range cases {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".paddock")
		if err := os.WriteFile(p, file, 0o600); err != nil {
			t.Fatal(err)
		}
		out, code := e.pdCode("session", "import", p, "--name", "hostile")
		if code != 2 || !strings.Contains(out, "nothing was imported") {
			t.Errorf("%s: exit %d: %s", name, code, out)
		}
		// Sent to the Runner directly, past the CLI's own check.
		if code := e.importRaw(file); code != 2 {
			t.Errorf("%s: the Runner took it: exit %d", name, code)
		}
	}
	var all []session.Session
	if err := json.Unmarshal([]byte(e.pd("ls", "-a", "--json")), &all); err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		if s.Name == "hostile" {
			t.Fatalf("a session was made: %+v", s)
		}
	}
	if after := list(); after != before {
		t.Fatalf("the state directory changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestPortableImportNeverWeakens (issue 31 item 4): through the CLI, a
// file someone hands you that asks for direct mode with the anthropic
// posture, or for an allowlist with approvals "by root (admin)", makes a
// proxy-mode, offline session without them, and the import lists on
// stderr what it took and what it did not, with the flag that takes it.
// With --trust-settings the allowlist is taken and said, its approval
// recorded as imported from the file; the audit names the flags.
func TestPortableImportNeverWeakens(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	handed := func(name string, st portable.Settings) string {
		const id = "0b6c1a52-3f0e-4d6b-9a51-2f1d7c3e4a10"
		var buf bytes.Buffer
		if err := portable.Write(&buf, &portable.Archive{Manifest: portable.Manifest{Conversation: id}, Settings: st,
			Files: []portable.File{{Path: "projects/-workspace/" + id + ".jsonl", Data: []byte(`{"type":"user","message":{"role":"user","content":"hi"}}` + "\n")}}}); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	inspect := func(name string) session.Session {
		var s session.Session
		if err := json.Unmarshal([]byte(e.pd("inspect", name)), &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	imp := func(args ...string) string {
		t.Helper()
		out, errs, code := e.pdRun(append([]string{"session", "import", "--no-start", "--backend", "local"}, args...)...)
		if code != 0 {
			t.Fatalf("import %q: exit %d\n%s%s", args, code, out, errs)
		}
		return errs
	}
	direct := handed("direct.paddock", portable.Settings{Name: "direct", CredentialMode: session.ModeDirect, Egress: session.EgressAnthropic})
	open := handed("open.paddock", portable.Settings{Name: "open", Egress: session.EgressAllowlist, EgressAllow: []string{"evil.example"},
		EgressApproved: []session.Approval{{Rule: "exfil.example:443", By: "root (admin)", At: time.Now()}}})

	errs := imp(direct)
	if s := inspect("direct"); s.CredentialMode != session.ModeProxy || s.Egress != session.EgressOffline {
		t.Fatalf("a file asking for direct + anthropic made mode %s, egress %s\n%s", s.CredentialMode, s.Egress, errs)
	}
	for _, want := range []string{"import: not adopted: credential mode direct", "--keep-credential-mode", "import: not adopted: egress anthropic", "--keep-egress"} {
		if !strings.Contains(errs, want) {
			t.Errorf("the import did not say %q:\n%s", want, errs)
		}
	}
	errs = imp(open)
	if s := inspect("open"); s.Egress != session.EgressOffline || len(s.EgressAllow) != 0 || len(s.EgressApproved) != 0 {
		t.Fatalf("a file asking for an allowlist made %+v\n%s", s, errs)
	}
	if !strings.Contains(errs, "import: not adopted: approvals exfil.example:443 (the file says by root (admin))") ||
		!strings.Contains(errs, "import: adopted from the file: name open") {
		t.Errorf("the import said:\n%s", errs)
	}
	errs = imp(open, "--name", "trusted", "--trust-settings")
	s := inspect("trusted")
	want := "imported from open.paddock (approver said root (admin))"
	if s.Egress != session.EgressAllowlist || strings.Join(s.EgressAllow, ",") != "evil.example" || len(s.EgressApproved) != 1 || s.EgressApproved[0].By != want {
		t.Fatalf("with --trust-settings: %+v\n%s", s, errs)
	}
	if !strings.Contains(errs, "import: adopted from the file: egress allowlist, with --keep-egress") || !strings.Contains(errs, want) || strings.Contains(errs, "not adopted") {
		t.Errorf("with --trust-settings the import said:\n%s", errs)
	}
	if a := e.pd("audit"); !strings.Contains(a, "kept=credential_mode,egress,limits") {
		t.Errorf("the audit does not name the flags:\n%s", a)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// importRaw sends a file to the Runner's import route as it is, past
// the CLI's own check; 2 when the Runner refuses it as invalid.
func (e *env) importRaw(file []byte) int {
	e.t.Helper()
	_, err := api.NewClient(filepath.Join(e.dir, "paddock.sock")).ImportSession(context.Background(), api.ImportRequest{Name: "hostile"}, bytes.NewReader(file))
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errdefs.ErrInvalid) && strings.Contains(err.Error(), "nothing was imported"):
		return 2
	}
	return 1
}

// TestResumeHostTranscript: a conversation had on the host with the real
// pinned Claude Code (claude -p against a fake API, in a workspace) is
// continued in a box with paddock run --resume-host: the box's claude
// resumes it, and its next turn counts the host's.
func TestResumeHostTranscript(t *testing.T) {
	e := newEnv(t)
	home := testenv.TraversableTempDir(t)
	ws := sandboxtest.OwnedWorkspace(t, testenv.TraversableTempDir(t))
	hostAPI := fakeapi.New("sk-ant-api03-host-fake-key-000000000000000000")
	up := httptest.NewServer(hostAPI)
	defer up.Close()
	cmd := exec.Command(e.claude, "-p", "say hi from the host")
	cmd.Dir = ws
	cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin", "ANTHROPIC_BASE_URL=" + up.URL, "ANTHROPIC_API_KEY=sk-ant-api03-host-fake-key-000000000000000000",
		"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "hi from the fake server (turn 1)") {
		t.Fatalf("claude -p on the host: %v\n%s", err, out)
	}
	txs, _ := filepath.Glob(filepath.Join(home, ".claude", "projects", "*", "*.jsonl"))
	if len(txs) != 1 {
		t.Fatalf("host transcripts: %q", txs)
	}
	id := strings.TrimSuffix(filepath.Base(txs[0]), ".jsonl")

	// paddock run as the person: their HOME, the workspace the conversation was had in.
	run := func(args ...string) (string, int) {
		var o, eb bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		code := cli.Main(ctx, append([]string{"--state-dir", e.dir}, args...), cli.IO{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &eb,
			Env: []string{"PATH=/usr/bin:/bin", "HOME=" + home}})
		return o.String() + eb.String(), code
	}
	if out, code := run("run", "-d", "--name", "fromhost", "--backend", "local", "--workspace", ws, "--resume-host"); code != 0 || !strings.Contains(out, "continuing conversation "+id) {
		t.Fatalf("run --resume-host: %d\n%s", code, out)
	}
	e.resumed("fromhost", "say hi from the host", "hi from the fake server (turn 2)")
	var s session.Session
	if err := json.Unmarshal([]byte(e.pd("inspect", "fromhost")), &s); err != nil || s.ClaudeSessionID != id {
		t.Fatalf("the session resumes %q, not the host's %s (%v)", s.ClaudeSessionID, id, err)
	}
	// Named by id, on the other backend, the same.
	if out, code := run("run", "-d", "--name", "fromhost2", "--backend", "docker", "--workspace", ws, "--resume-host", id); code != 0 {
		t.Fatalf("run --resume-host ID: %d\n%s", code, out)
	}
	e.resumed("fromhost2", "say hi from the host", "hi from the fake server (turn 2)")
	// An id the host has no conversation of: said, nothing made.
	if out, code := run("run", "-d", "--name", "nothing", "--workspace", ws, "--resume-host=22222222-2222-4222-8222-222222222222"); code != 4 || !strings.Contains(out, "no conversation") {
		t.Fatalf("unknown id: %d %s", code, out)
	}
}
