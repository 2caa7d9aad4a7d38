package runner

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/box/sandbox/local"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/config"
	"github.com/paddockhq/paddock/internal/daemon/people"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
	"github.com/paddockhq/paddock/internal/sessions/limits"
	"github.com/paddockhq/paddock/internal/sessions/portable"
	"github.com/paddockhq/paddock/internal/sessions/session"
	"github.com/paddockhq/paddock/internal/testkit/fakeapi"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// stateFiles lists every file under dir, for "nothing was written".
func stateFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// hostileTarGz is a session file of entries as given, with a manifest
// telling the truth about them unless lie changes it.
func hostileTarGz(t *testing.T, entries []tar.Header, data [][]byte, lie func(*portable.Manifest)) []byte {
	t.Helper()
	m := portable.Manifest{Format: portable.Format, Version: portable.Version}
	for i, h := range entries {
		sum := sha256.Sum256(data[i])
		m.Entries = append(m.Entries, portable.ManifestEntry{Path: h.Name, Size: int64(len(data[i])), SHA256: hex.EncodeToString(sum[:])})
	}
	if lie != nil {
		lie(&m)
	}
	mb, _ := json.Marshal(m)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: portable.ManifestName, Size: int64(len(mb)), Mode: 0o600})
	tw.Write(mb)
	for i, h := range entries {
		h := h
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(data[i]))
		}
		h.Mode = 0o600
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write(data[i])
		}
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// TestImportHostileWritesNothing: a Runner refuses each damaged or
// hostile session file with ErrInvalid, and no session, file or log of
// it is left in its state directory.
func TestImportHostileWritesNothing(t *testing.T) {
	tr := startRunner(t, []string{"ANTHROPIC_API_KEY=sk-fake-env-key"}, nil, "off")
	ctx := context.Background()
	settings := []byte(`{"name":"evil"}`)
	tx := []byte(`{"type":"user"}` + "\n")
	txName := portable.ClaudePrefix + "projects/-workspace/0b6c1a52-3f0e-4d6b-9a51-2f1d7c3e4a10.jsonl"
	var good bytes.Buffer
	if err := portable.Write(&good, &portable.Archive{Settings: portable.Settings{Name: "good"},
		Files: []portable.File{{Path: "projects/-workspace/x.jsonl", Data: tx}}}); err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"truncated": good.Bytes()[:good.Len()-10],
		"traversal": hostileTarGz(t, []tar.Header{{Name: portable.SettingsName}, {Name: portable.ClaudePrefix + "projects/../../../etc/cron.d/x"}},
			[][]byte{settings, []byte("x")}, nil),
		"absolute": hostileTarGz(t, []tar.Header{{Name: portable.SettingsName}, {Name: "/etc/passwd"}}, [][]byte{settings, []byte("x")}, nil),
		"symlink": hostileTarGz(t, []tar.Header{{Name: portable.SettingsName}, {Name: txName, Typeflag: tar.TypeSymlink, Linkname: "/etc/shadow"}},
			[][]byte{settings, nil}, nil),
		"device": hostileTarGz(t, []tar.Header{{Name: portable.SettingsName}, {Name: txName, Typeflag: tar.TypeBlock}}, [][]byte{settings, nil}, nil),
		"huge": hostileTarGz(t, []tar.Header{{Name: portable.SettingsName}, {Name: txName}}, [][]byte{settings, tx},
			func(m *portable.Manifest) { m.Entries[1].Size = 1 << 40 }),
		"duplicate": hostileTarGz(t, []tar.Header{{Name: portable.SettingsName}, {Name: txName}, {Name: txName}}, [][]byte{settings, tx, tx}, nil),
		"lying hash": hostileTarGz(t, []tar.Header{{Name: portable.SettingsName}, {Name: txName}}, [][]byte{settings, tx},
			func(m *portable.Manifest) { m.Entries[1].SHA256 = strings.Repeat("0", 64) }),
		"newer version": hostileTarGz(t, []tar.Header{{Name: portable.SettingsName}}, [][]byte{settings},
			func(m *portable.Manifest) { m.Version = portable.Version + 1 }),
		"credential file": hostileTarGz(t, []tar.Header{{Name: portable.SettingsName}, {Name: portable.ClaudePrefix + ".credentials.json"}},
			[][]byte{settings, []byte(`{}`)}, nil),
	}
	before := stateFiles(t, tr.dir)
	for name, file := range cases {
		t.Run(name, func(t *testing.T) {
			res, err := tr.ImportSession(ctx, api.ImportRequest{}, bytes.NewReader(file))
			if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "nothing was imported") {
				t.Fatalf("import: %v (%+v)", err, res)
			}
			if ss, _ := tr.Sessions(ctx); len(ss) != 0 {
				t.Fatalf("a session was made: %+v", ss)
			}
			if after := stateFiles(t, tr.dir); strings.Join(after, "\n") != strings.Join(before, "\n") {
				t.Fatalf("the state directory changed:\nbefore %q\nafter  %q", before, after)
			}
		})
	}
}

// portableRunner is a Runner on this host's backends against the fake,
// its config changed by tweaks.
func portableRunner(t *testing.T, backends map[string]sandbox.Backend, tweaks ...func(*config.Config)) *Runner {
	t.Helper()
	fake := fakeapi.New(ownerOAuth)
	up := httptest.NewServer(fake)
	t.Cleanup(up.Close)
	cfg := config.Default()
	cfg.Proxy.Listen = "127.0.0.1:0"
	cfg.Web.Listen = "off"
	cfg.Anthropic.Upstream = up.URL
	for _, f := range tweaks {
		f(&cfg)
	}
	r, err := New(Options{StateDir: filepath.Join(t.TempDir(), "state"), Config: cfg, Env: []string{"CLAUDE_CODE_OAUTH_TOKEN=" + ownerOAuth}, Backends: backends})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, r)
	return r
}

// inBox runs a shell script in a running session's box.
func inBox(t *testing.T, r *Runner, id, script string) string {
	t.Helper()
	var out strings.Builder
	p, err := r.Exec(context.Background(), id, channel.ExecOptions{Argv: []string{"sh", "-c", script}, Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatal(err)
	}
	p.CloseStdin()
	if code, _ := p.Wait(); code != 0 {
		t.Fatalf("%s: exit %d: %s", script, code, out.String())
	}
	return out.String()
}

// TestExportImportAcrossRunners: a session's Claude state, settings and
// decision log leave one Runner (read from its running box, then from
// its volume while it sleeps) and arrive in a new session of a second
// Runner on the other backend, which takes the conversation's id; a
// login file, a token and debug logs stay behind.
func TestExportImportAcrossRunners(t *testing.T) {
	backends := testBackends(t)
	a := portableRunner(t, backends)
	b := portableRunner(t, backends)
	ctx := context.Background()
	s, err := a.CreateSession(ctx, api.CreateRequest{Name: "mover", Backend: "local", Model: "claude-sonnet-4-5", Effort: "high",
		Egress: session.EgressAllowlist, Allow: []string{"github.com"}, RPM: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer a.RemoveSession(ctx, s.ID, false)
	tok := strings.TrimSpace(inBox(t, a, s.ID, `printenv CLAUDE_CODE_OAUTH_TOKEN`))
	if !strings.HasPrefix(tok, "pdk_st_") {
		t.Fatalf("box token %q", tok)
	}
	dir := `"$CLAUDE_CONFIG_DIR"/projects/-workspace/` + s.ClaudeSessionID
	inBox(t, a, s.ID, `set -e
mkdir -p `+dir+`/subagents "$CLAUDE_CONFIG_DIR"/debug
echo '{"type":"user","message":{"role":"user","content":"sub"},"isSidechain":true}' > `+dir+`/subagents/agent-a1.jsonl
echo '{"type":"summary","summary":"env said ANTHROPIC_API_KEY='"$CLAUDE_CODE_OAUTH_TOKEN"'"}' > `+dir+`.jsonl
echo '{"claudeAiOauth":{"accessToken":"sk-ant-oat01-leaked-leaked-leaked"}}' > "$CLAUDE_CONFIG_DIR"/.credentials.json
echo 'debug log' > "$CLAUDE_CONFIG_DIR"/debug/log.txt
echo '# notes' > "$CLAUDE_CONFIG_DIR"/CLAUDE.md`)
	a.decisions.Record(decisionlog.Entry{Time: time.Now().UTC(), Session: s.ID, RequestID: "r1", Method: "POST", Path: "/v1/messages", Decision: "forwarded", Status: 200, InputTokens: 11})

	check := func(file []byte, when string) *portable.Archive {
		t.Helper()
		if bytes.Contains(file, []byte(tok)) {
			t.Fatalf("%s: the file holds the session token", when)
		}
		got, _, err := portable.Read(bytes.NewReader(file), portable.Limits{})
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		paths := map[string]string{}
		for _, f := range got.Files {
			paths[f.Path] = string(f.Data)
		}
		for _, p := range []string{"projects/-workspace/" + s.ClaudeSessionID + "/subagents/agent-a1.jsonl", "projects/-workspace/" + s.ClaudeSessionID + ".jsonl", "CLAUDE.md", "settings.json", ".claude.json"} {
			if _, ok := paths[p]; !ok {
				t.Errorf("%s: %s did not travel (%d files)", when, p, len(paths))
			}
		}
		for p, d := range paths {
			if strings.Contains(p, ".credentials") || strings.HasPrefix(p, "debug/") || strings.Contains(d, tok) || strings.Contains(d, "leaked") {
				t.Errorf("%s: %s travelled: %q", when, p, d)
			}
		}
		if got.Manifest.Conversation != s.ClaudeSessionID || got.Settings.Model != "claude-sonnet-4-5" || got.Settings.Limits.RPM != 7 ||
			len(got.Settings.EgressAllow) != 1 || len(got.Decisions) == 0 {
			t.Errorf("%s: manifest %+v settings %+v, %d decisions", when, got.Manifest, got.Settings, len(got.Decisions))
		}
		return got
	}
	running, err := a.ExportSession(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	check(running, "running")
	if _, err := a.Sleep(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	asleep, err := a.ExportSession(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := check(asleep, "asleep")
	if bx, err := backends["local"].Inspect(ctx, s.BoxID); err != nil || bx.State == sandbox.StateRunning {
		t.Fatalf("the box started for the export still runs: %+v %v", bx, err)
	}
	if cur, _ := a.Session(ctx, s.ID); cur.Observed != session.Asleep {
		t.Fatalf("after export: %s", cur.Observed)
	}

	res, err := b.ImportSession(ctx, api.ImportRequest{Backend: "docker", KeepEgress: true}, bytes.NewReader(asleep))
	if err != nil {
		t.Fatal(err)
	}
	n := res.Session
	defer b.RemoveSession(ctx, n.ID, false)
	if n.Name != "mover" || n.Backend != "docker" || n.ClaudeSessionID != s.ClaudeSessionID || n.Observed != session.Running ||
		n.Model != "claude-sonnet-4-5" || n.Effort != "high" || n.Limits.RPM != 7 || n.Egress != session.EgressAllowlist || n.ID == s.ID {
		t.Fatalf("imported: %+v", n)
	}
	if res.Files != len(got.Files) || res.Decisions != len(got.Decisions) {
		t.Fatalf("result: %+v", res)
	}
	if out := inBox(t, b, n.ID, `cat `+dir+`/subagents/agent-a1.jsonl; cat "$CLAUDE_CONFIG_DIR"/CLAUDE.md; ls -a "$CLAUDE_CONFIG_DIR"`); !strings.Contains(out, `"sub"`) ||
		!strings.Contains(out, "# notes") || strings.Contains(out, ".credentials.json") || strings.Contains(out, "debug") {
		t.Fatalf("in the new box: %s", out)
	}
	// The moved log first (the new box's own self-test follows), with the new id.
	l, err := b.decisions.ReadLog(n.ID)
	if err != nil || len(l.Entries) < len(got.Decisions) {
		t.Fatalf("decision log: %+v %v", l.Entries, err)
	}
	for i, d := range got.Decisions {
		if e := l.Entries[i]; e.Session != n.ID || e.RequestID != d.RequestID || e.InputTokens != d.InputTokens {
			t.Fatalf("decision %d: %+v, moved from %+v", i, e, d)
		}
	}
	// The same file again under the same name while the first lives: refused, and nothing left.
	before, _ := b.Sessions(ctx)
	if _, err := b.ImportSession(ctx, api.ImportRequest{Backend: "docker", KeepEgress: true}, bytes.NewReader(asleep)); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("second import under a name in use: %v", err)
	}
	if after, _ := b.Sessions(ctx); len(after) != len(before) {
		t.Fatalf("a refused import left a session: %d, then %d", len(before), len(after))
	}
}

// localBackend is this host's local backend alone.
func localBackend(t *testing.T) map[string]sandbox.Backend {
	t.Helper()
	testenv.Root(t)
	testenv.LookPath(t, "bwrap")
	lb, err := local.New(local.Config{Root: filepath.Join(testenv.TraversableTempDir(t), "local"), GuestBinary: testenv.GuestBinary(t), ClaudeBinary: testenv.Claude(t)})
	if err != nil {
		testenv.Missing(t, "local backend: "+err.Error())
	}
	return map[string]sandbox.Backend{"local": lb}
}

// handedFile is a session file someone hands the importer, with st as
// its settings and a conversation to resume.
func handedFile(t *testing.T, st portable.Settings) []byte {
	t.Helper()
	const id = "0b6c1a52-3f0e-4d6b-9a51-2f1d7c3e4a10"
	var buf bytes.Buffer
	if err := portable.Write(&buf, &portable.Archive{Manifest: portable.Manifest{Conversation: id}, Settings: st,
		Files: []portable.File{{Path: "projects/-workspace/" + id + ".jsonl", Data: []byte(`{"type":"user","message":{"role":"user","content":"hi"}}` + "\n")}}}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// said reports whether one of lines holds every one of subs.
func said(lines []string, subs ...string) bool {
	for _, l := range lines {
		all := true
		for _, s := range subs {
			all = all && strings.Contains(l, s)
		}
		if all {
			return true
		}
	}
	return false
}

// TestImportNeverWeakens (issue 31 item 4): a file someone hands you that
// asks for direct mode, a wider egress, allow rules, ask mode, a policy,
// approvals "by root (admin)" and looser limits makes, by default, a
// session in proxy mode, offline, with none of those and this Runner's
// limits, its deny rules and stricter limits taken; the import says
// each setting it took and each it did not, with the flag that takes
// it. With --keep-egress, --keep-credential-mode and --keep-limits the
// file's settings are taken and said, and its approvals are recorded as
// imported from the file, never as the approver it names.
func TestImportNeverWeakens(t *testing.T) {
	r := portableRunner(t, localBackend(t), func(c *config.Config) {
		c.Sessions.RPM, c.Sessions.TokenBudget = 30, 100000
		c.Egress.Policies = map[string]config.EgressPolicy{"corp": {Allow: []string{"corp.example"}}}
	})
	ctx := context.Background()
	direct := handedFile(t, portable.Settings{Name: "handed", Model: "claude-sonnet-4-5", CredentialMode: session.ModeDirect,
		Egress: session.EgressAnthropic, Limits: limits.Limits{RPM: 1000}})
	open := handedFile(t, portable.Settings{Name: "opened", Egress: session.EgressAllowlist, EgressAllow: []string{"evil.example"},
		EgressDeny: []string{"bad.example"}, EgressAsk: true, EgressPolicies: []string{"corp"},
		EgressApproved: []session.Approval{{Rule: "exfil.example:443", By: "root (admin)", At: time.Now().Add(-time.Hour)},
			{Rule: "old.example:443", By: "root (admin)", Until: time.Now().Add(-time.Minute)}},
		Limits: limits.Limits{RPM: 10}})
	imp := func(req api.ImportRequest, file []byte) (api.ImportResult, session.Session) {
		t.Helper()
		req.Backend, req.NoStart, req.Source = "local", true, "/somewhere/handed.paddock"
		res, err := r.ImportSession(ctx, req, bytes.NewReader(file))
		if err != nil {
			t.Fatalf("import %+v: %v", req, err)
		}
		t.Cleanup(func() { r.RemoveSession(context.Background(), res.Session.ID, false) })
		t.Logf("import %+v:\nadopted:  %s\ndeclined: %s", req, strings.Join(res.Adopted, "\n          "), strings.Join(res.Declined, "\n          "))
		s, err := r.Session(ctx, res.Session.ID) // the record as stored
		if err != nil {
			t.Fatal(err)
		}
		return res, s
	}

	// By default: nothing looser than this Runner's defaults.
	res, s := imp(api.ImportRequest{}, direct)
	if s.CredentialMode != session.ModeProxy || s.Egress != session.EgressOffline || s.Limits.RPM != 30 || s.Limits.TokenBudget != 100000 || s.Model != "claude-sonnet-4-5" {
		t.Fatalf("a file asking for direct + anthropic made: mode %s, egress %s, limits %+v", s.CredentialMode, s.Egress, s.Limits)
	}
	if said(res.Adopted, "credential mode") || said(res.Adopted, "egress") || !said(res.Adopted, "model claude-sonnet-4-5") ||
		!said(res.Declined, "credential mode direct", "--keep-credential-mode") || !said(res.Declined, "egress anthropic", "--keep-egress") ||
		!said(res.Declined, "rpm limit 1000", "--keep-limits") {
		t.Fatalf("the import did not say what it took and left:\nadopted %q\ndeclined %q", res.Adopted, res.Declined)
	}
	res, s = imp(api.ImportRequest{}, open)
	if s.Egress != session.EgressOffline || len(s.EgressAllow) != 0 || s.EgressAsk || len(s.EgressPolicies) != 0 || len(s.EgressApproved) != 0 ||
		strings.Join(s.EgressDeny, ",") != "bad.example" || s.Limits.RPM != 10 || s.Limits.TokenBudget != 100000 {
		t.Fatalf("a file asking for an allowlist made: %+v", s)
	}
	if !said(res.Declined, "allow rules evil.example", "--keep-egress") || !said(res.Declined, "approvals exfil.example:443", "root (admin)", "--keep-egress") ||
		!said(res.Declined, "ask mode") || !said(res.Declined, "egress policies corp") || !said(res.Adopted, "deny rules: bad.example") ||
		!said(res.Adopted, "rpm limit 10") || !said(res.Adopted, "credential mode proxy") || said(res.Adopted, "old.example") || said(res.Declined, "old.example") {
		t.Fatalf("the import did not say what it took and left:\nadopted %q\ndeclined %q", res.Adopted, res.Declined)
	}

	// With the flags: taken, and said; approvals recorded as imported.
	res, s = imp(api.ImportRequest{Name: "opened2", KeepEgress: true, KeepLimits: true}, open)
	if s.Egress != session.EgressAllowlist || strings.Join(s.EgressAllow, ",") != "evil.example" || !s.EgressAsk || strings.Join(s.EgressPolicies, ",") != "corp" ||
		s.Limits.RPM != 10 || s.Limits.TokenBudget != 0 {
		t.Fatalf("with --keep-egress --keep-limits: %+v", s)
	}
	want := "imported from handed.paddock (approver said root (admin))"
	if len(s.EgressApproved) != 1 || s.EgressApproved[0].Rule != "exfil.example:443" || s.EgressApproved[0].By != want {
		t.Fatalf("approvals: %+v, want one by %q", s.EgressApproved, want)
	}
	if sum := s.EgressSummary(); strings.Contains(sum, "by root (admin)") || !strings.Contains(sum, want) {
		t.Fatalf("the session's egress reads %q", sum)
	}
	if !said(res.Adopted, "egress allowlist", "--keep-egress") || !said(res.Adopted, "allow rules", "evil.example") ||
		!said(res.Adopted, "approval of exfil.example:443", "imported from handed.paddock (approver said root (admin))") || !said(res.Adopted, "token budget none", "--keep-limits") ||
		len(res.Declined) != 0 {
		t.Fatalf("with the flags, the import said:\nadopted %q\ndeclined %q", res.Adopted, res.Declined)
	}
	res, s = imp(api.ImportRequest{Name: "handed2", KeepEgress: true, KeepCredentialMode: true}, direct)
	if s.CredentialMode != session.ModeDirect || s.Egress != session.EgressAnthropic || s.Limits.RPM != 30 {
		t.Fatalf("with --keep-credential-mode --keep-egress: mode %s, egress %s, limits %+v", s.CredentialMode, s.Egress, s.Limits)
	}
	if !said(res.Adopted, "credential mode direct", "--keep-credential-mode") || !said(res.Declined, "rpm limit 1000", "--keep-limits") {
		t.Fatalf("with the flags, the import said:\nadopted %q\ndeclined %q", res.Adopted, res.Declined)
	}
}

// TestImportStreamsAndIsBounded (issue 31 item 9): a small file that
// unpacks to 127 MiB of "{}" lines is refused while it streams in,
// without the Runner allocating what it unpacks to, and nothing is
// written; imports under way are bounded per person and in all, one
// more refused at once as busy, and a slot is free again once an import
// ends.
func TestImportStreamsAndIsBounded(t *testing.T) {
	tr := startRunner(t, []string{"ANTHROPIC_API_KEY=sk-fake-env-key"}, nil, "off")
	ctx := context.Background()
	half := bytes.Repeat([]byte("{}\n"), 127<<20/6)
	const conv = "0b6c1a52-3f0e-4d6b-9a51-2f1d7c3e4a10"
	flood := hostileTarGz(t, []tar.Header{{Name: portable.SettingsName}, {Name: portable.ClaudePrefix + "projects/-workspace/" + conv + ".jsonl"},
		{Name: portable.ClaudePrefix + "projects/-workspace/" + conv + "/subagents/agent-a1.jsonl"}}, [][]byte{[]byte(`{"name":"flood"}`), half, half}, nil)
	half = nil
	if len(flood) > 1<<20 {
		t.Fatalf("the flood is %d bytes compressed", len(flood))
	}
	before := stateFiles(t, tr.dir)
	var err error
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	_, err = tr.ImportSession(ctx, api.ImportRequest{}, bytes.NewReader(flood))
	runtime.ReadMemStats(&m1)
	if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "lines in all") || !strings.Contains(err.Error(), "nothing was imported") {
		t.Fatalf("the flood: %v", err)
	}
	if n := m1.TotalAlloc - m0.TotalAlloc; n > 32<<20 {
		t.Fatalf("the Runner allocated %d MiB to refuse a %d KiB file", n>>20, len(flood)>>10)
	} else {
		t.Logf("the flood (%d KiB) refused after %d MiB allocated", len(flood)>>10, n>>20)
	}
	if after := stateFiles(t, tr.dir); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("the state directory changed:\nbefore %q\nafter  %q", before, after)
	}

	// Imports under way: each holds the Runner's gate while its file
	// streams in (here: never ends, until the test ends it).
	prefix := handedFile(t, portable.Settings{Name: "slow"})[:64]
	type pending struct {
		w    *io.PipeWriter
		done chan error
	}
	start := func(who people.Person) pending {
		t.Helper()
		pr, pw := io.Pipe()
		p := pending{pw, make(chan error, 1)}
		go func() {
			_, err := tr.ImportSession(people.With(ctx, who), api.ImportRequest{}, pr)
			pr.CloseWithError(err)
			p.done <- err
		}()
		if _, err := pw.Write(prefix); err != nil { // read: it is under way
			t.Fatalf("an import of %s's: %v", who.Name, err)
		}
		return p
	}
	refused := func(who people.Person, want string) {
		t.Helper()
		done := make(chan error, 1)
		go func() {
			_, err := tr.ImportSession(people.With(ctx, who), api.ImportRequest{}, strings.NewReader("never read"))
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, errdefs.ErrLimit) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "try again") {
				t.Fatalf("one import more of %s's: %v, want busy (%q)", who.Name, err, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("one import more of %s's was not refused", who.Name)
		}
	}
	ann, ben, cat := people.Person{UID: 4242101, Name: "ann"}, people.Person{UID: 4242102, Name: "ben"}, people.Person{UID: 4242103, Name: "cat"}
	var all []pending
	defer func() {
		for _, p := range all {
			p.w.CloseWithError(io.ErrUnexpectedEOF)
		}
	}()
	for range maxImportsPerPerson {
		all = append(all, start(ann))
	}
	refused(ann, "you have 2 imports under way")
	for range maxImports - maxImportsPerPerson {
		all = append(all, start(ben))
	}
	refused(cat, "this Runner has 4 imports under way")
	// One ends (its file cut short): its slot is free again.
	all[0].w.CloseWithError(io.ErrUnexpectedEOF)
	if err := <-all[0].done; !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("an import whose file was cut: %v", err)
	}
	all[0] = start(cat)
	refused(ann, "this Runner has 4 imports under way")
	for _, p := range all {
		p.w.CloseWithError(io.ErrUnexpectedEOF)
		<-p.done
	}
	if _, err := tr.ImportSession(people.With(ctx, ann), api.ImportRequest{}, strings.NewReader("not gzip")); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("an import once all ended: %v", err)
	}
}
