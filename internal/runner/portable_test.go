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
	"io/fs"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/api"
	"github.com/paddockhq/paddock/internal/channel"
	"github.com/paddockhq/paddock/internal/config"
	"github.com/paddockhq/paddock/internal/decisionlog"
	"github.com/paddockhq/paddock/internal/errdefs"
	"github.com/paddockhq/paddock/internal/fakeapi"
	"github.com/paddockhq/paddock/internal/portable"
	"github.com/paddockhq/paddock/internal/sandbox"
	"github.com/paddockhq/paddock/internal/session"
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

// portableRunner is a Runner on this host's backends against the fake.
func portableRunner(t *testing.T, backends map[string]sandbox.Backend) *Runner {
	t.Helper()
	fake := fakeapi.New(ownerOAuth)
	up := httptest.NewServer(fake)
	t.Cleanup(up.Close)
	cfg := config.Default()
	cfg.Proxy.Listen = "127.0.0.1:0"
	cfg.Web.Listen = "off"
	cfg.Anthropic.Upstream = up.URL
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

	res, err := b.ImportSession(ctx, api.ImportRequest{Backend: "docker"}, bytes.NewReader(asleep))
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
	if _, err := b.ImportSession(ctx, api.ImportRequest{Backend: "docker"}, bytes.NewReader(asleep)); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("second import under a name in use: %v", err)
	}
	if after, _ := b.Sessions(ctx); len(after) != len(before) {
		t.Fatalf("a refused import left a session: %d, then %d", len(before), len(after))
	}
}
