package portable

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/sessions/activity"
	"github.com/paddockhq/paddock/internal/sessions/decisionlog"
	"github.com/paddockhq/paddock/internal/sessions/limits"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

const conv = "0b6c1a52-3f0e-4d6b-9a51-2f1d7c3e4a10"

// A token and key that look real: the format must never carry them.
var (
	sessionToken = secret.TokenPrefix + "AAAAbbbbCCCCddddEEEEffffGGGGhhhhIIIIjjjjKKK"
	apiKey       = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789"
)

func sample() *Archive {
	tx := `{"type":"user","message":{"role":"user","content":"hello"},"sessionId":"` + conv + `"}` + "\n" +
		`{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"hi from the fake server (turn 1)"}]}}` + "\n" +
		`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"ANTHROPIC_API_KEY=` + sessionToken + `"}]}}` + "\n"
	return &Archive{
		Manifest: Manifest{Conversation: conv, Paddock: "test"},
		Settings: Settings{Name: "web", Model: "claude-sonnet-4-5", Effort: "high", CredentialMode: session.ModeProxy,
			Egress: session.EgressAllowlist, EgressAllow: []string{"github.com"}, EgressDeny: []string{"evil.example"},
			Limits: limits.Limits{RPM: 10, TokenBudget: 1000}, Restart: activity.RestartAlways,
			Activity: activity.Activity{State: activity.Waiting}, Created: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC),
			Carried: &decisionlog.Carry{Version: decisionlog.CarryVersion, Totals: decisionlog.Totals{Requests: 3, InputTokens: 7}}},
		Decisions: []decisionlog.Entry{{Session: "oldid", RequestID: "r1", Method: "POST", Path: "/v1/messages", Decision: "forwarded", Status: 200, InputTokens: 5}},
		Files: []File{
			{Path: "projects/-workspace/" + conv + ".jsonl", Data: []byte(tx)},
			{Path: "projects/-workspace/" + conv + "/subagents/agent-a1.jsonl", Data: []byte(`{"type":"user","isSidechain":true}` + "\n")},
			{Path: ".claude.json", Data: []byte(`{"numStartups":3,"primaryApiKey":"` + apiKey + `","customApiKeyResponses":{"approved":["x"]},"projects":{"/workspace":{"hasTrustDialogAccepted":true}}}`)},
			{Path: "settings.json", Data: []byte(`{"model":"opus","apiKeyHelper":"/bin/get-key","env":{"ANTHROPIC_API_KEY":"x","FOO":"bar","BAR":"` + apiKey + `"}}`)},
			{Path: "todos/" + conv + "-agent-" + conv + ".json", Data: []byte(`[]`)},
			{Path: "history.jsonl", Data: []byte(`{"display":"hello"}` + "\n")},
		},
	}
}

func write(t testing.TB, a *Archive) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, a); err != nil {
		t.Fatalf("Write: %v", err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	a := sample()
	b := write(t, a)
	got, notes, err := Read(bytes.NewReader(b), Limits{})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if got.Manifest.Conversation != conv || got.Manifest.Version != Version || got.Manifest.Format != Format {
		t.Fatalf("manifest: %+v", got.Manifest)
	}
	if got.Settings.Name != "web" || got.Settings.Model != a.Settings.Model || got.Settings.Limits != a.Settings.Limits ||
		got.Settings.EgressAllow[0] != "github.com" || got.Settings.Carried.Totals.InputTokens != 7 || got.Settings.Restart != activity.RestartAlways {
		t.Fatalf("settings: %+v", got.Settings)
	}
	if len(got.Decisions) != 1 || got.Decisions[0].Session != "" || got.Decisions[0].InputTokens != 5 {
		t.Fatalf("decisions: %+v", got.Decisions)
	}
	if len(got.Files) != len(a.Files) {
		t.Fatalf("files: %d, want %d", len(got.Files), len(a.Files))
	}
	// What Write took out is in the manifest; Read finds nothing more.
	if len(notes) != 0 {
		t.Fatalf("Read of a written file had notes: %q", notes)
	}
	if len(got.Manifest.LeftOut) == 0 {
		t.Fatal("the manifest does not say what was left out")
	}
	// Never a credential in the file, compressed or not.
	raw := gunzip(t, b)
	for _, s := range []string{sessionToken, apiKey, `"primaryApiKey":`, `"apiKeyHelper":`, `"ANTHROPIC_API_KEY":`, "oldid"} {
		if bytes.Contains(raw, []byte(s)) {
			t.Errorf("the file holds %q", s)
		}
	}
	for _, f := range got.Files {
		if f.Path == "settings.json" && !bytes.Contains(f.Data, []byte(`"FOO": "bar"`)) {
			t.Errorf("settings.json lost what may travel: %s", f.Data)
		}
		if strings.HasSuffix(f.Path, conv+".jsonl") && !bytes.Contains(f.Data, []byte("ANTHROPIC_API_KEY="+secret.Redacted)) {
			t.Errorf("transcript not redacted as expected: %s", f.Data)
		}
	}
	// Writing what was read gives the same entries.
	b2 := write(t, got)
	got2, _, err := Read(bytes.NewReader(b2), Limits{})
	if err != nil {
		t.Fatalf("Read again: %v", err)
	}
	if len(got2.Files) != len(got.Files) {
		t.Fatal("second round trip lost files")
	}
}

func gunzip(t testing.TB, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := out.ReadFrom(zr); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// raw is one entry of a hand-made file.
type raw struct {
	name string
	typ  byte
	data []byte
	link string
}

// craft writes entries as a session file with a manifest that, unless
// lie changes it, tells the truth about them.
func craft(t testing.TB, entries []raw, lie func(*Manifest)) []byte {
	t.Helper()
	m := Manifest{Format: Format, Version: Version, Conversation: conv}
	for _, e := range entries {
		if e.name == ManifestName {
			continue
		}
		sum := sha256.Sum256(e.data)
		m.Entries = append(m.Entries, ManifestEntry{Path: e.name, Size: int64(len(e.data)), SHA256: hex.EncodeToString(sum[:])})
	}
	if lie != nil {
		lie(&m)
	}
	mb, _ := json.Marshal(m)
	if len(entries) == 0 || entries[0].name != ManifestName {
		entries = append([]raw{{name: ManifestName, data: mb}}, entries...)
	}
	return tarGz(t, entries)
}

func tarGz(t testing.TB, entries []raw) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		size := int64(len(e.data))
		if typ != tar.TypeReg {
			size = 0
		}
		h := &tar.Header{Typeflag: typ, Name: e.name, Mode: 0o600, Size: size, Linkname: e.link, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("%s: %v", e.name, err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write(e.data); err != nil {
				t.Fatal(err)
			}
		}
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

var settingsJSON = []byte(`{"name":"x"}`)

func good() []raw {
	return []raw{
		{name: SettingsName, data: settingsJSON},
		{name: ClaudePrefix + "projects/-workspace/" + conv + ".jsonl", data: []byte(`{"type":"user"}` + "\n")},
	}
}

// hostile lists files an import must refuse, each for its own reason.
func hostile(t testing.TB) []struct {
	name string
	file []byte
	want string
} {
	with := func(extra ...raw) []raw { return append(good(), extra...) }
	valid := craft(t, good(), nil)
	type c = struct {
		name string
		file []byte
		want string
	}
	cases := []c{
		{"traversal", craft(t, with(raw{name: ClaudePrefix + "projects/../../etc/passwd", data: []byte("x")}), nil), "clean relative"},
		{"traversal at the top", craft(t, with(raw{name: "../x", data: []byte("x")}), nil), "not one a session file has"},
		{"absolute path", craft(t, with(raw{name: "/etc/passwd", data: []byte("x")}), nil), "not one a session file has"},
		{"absolute below claude", craft(t, with(raw{name: ClaudePrefix + "/etc/passwd", data: []byte("x")}), nil), "clean relative"},
		{"dot component", craft(t, with(raw{name: ClaudePrefix + "projects/./a.jsonl", data: []byte("{}")}), nil), "clean relative"},
		{"backslash", craft(t, with(raw{name: ClaudePrefix + "projects/a\\..\\b", data: []byte("x")}), nil), "backslash"},
		{"not carried", craft(t, with(raw{name: ClaudePrefix + "debug/log.txt", data: []byte("x")}), nil), "not part of the Claude Code state"},
		{"home dotfile", craft(t, with(raw{name: ClaudePrefix + ".bashrc", data: []byte("x")}), nil), "not part of the Claude Code state"},
		{"credential file", craft(t, with(raw{name: ClaudePrefix + "projects/.credentials.json", data: []byte("{}")}), nil), "login file"},
		{"symlink", tarGz(t, []raw{{name: ManifestName, data: manifestOf(t, good())}, {name: SettingsName, typ: tar.TypeSymlink, link: "/etc/passwd"}}), "a symlink"},
		{"hard link", tarGz(t, []raw{{name: ManifestName, data: manifestOf(t, good())}, {name: SettingsName, typ: tar.TypeLink, link: ManifestName}}), "a hard link"},
		{"device", tarGz(t, []raw{{name: ManifestName, data: manifestOf(t, good())}, {name: SettingsName, typ: tar.TypeChar}}), "a device"},
		{"fifo", tarGz(t, []raw{{name: ManifestName, data: manifestOf(t, good())}, {name: SettingsName, typ: tar.TypeFifo}}), "a FIFO"},
		{"directory", tarGz(t, []raw{{name: ManifestName, data: manifestOf(t, good())}, {name: "claude/projects/", typ: tar.TypeDir}}), "a directory"},
		{"symlink as manifest", tarGz(t, []raw{{name: ManifestName, typ: tar.TypeSymlink, link: "/etc/shadow"}}), "a symlink"},
		{"huge entry in manifest", craft(t, good(), func(m *Manifest) { m.Entries[1].Size = 1 << 40 }), "an entry may have at most"},
		{"huge entry", craft(t, with(raw{name: ClaudePrefix + "CLAUDE.md", data: bytes.Repeat([]byte("a"), 3000)}), nil), "an entry may have at most"},
		{"huge in all", craft(t, with(raw{name: ClaudePrefix + "CLAUDE.md", data: bytes.Repeat([]byte("a"), 1500)}, raw{name: ClaudePrefix + "plans/p.md", data: bytes.Repeat([]byte("a"), 1500)}), nil), "in all"},
		{"too many entries", craft(t, manyEntries(30), nil), "more than 20"},
		{"duplicate entry", craft(t, with(raw{name: ClaudePrefix + "CLAUDE.md", data: []byte("a")}, raw{name: ClaudePrefix + "CLAUDE.md", data: []byte("a")}), nil), "listed twice"},
		{"duplicate in the stream only", craft(t, with(raw{name: ClaudePrefix + "CLAUDE.md", data: []byte("a")}, raw{name: ClaudePrefix + "CLAUDE.md", data: []byte("a")}),
			func(m *Manifest) { m.Entries = m.Entries[:len(m.Entries)-1] }), "after the last one the manifest lists"},
		{"file where a directory is", craft(t, with(raw{name: ClaudePrefix + "projects/x", data: []byte("a")}, raw{name: ClaudePrefix + "projects/x/y.md", data: []byte("a")}), nil), "is a file, not a directory"},
		{"newer version", craft(t, good(), func(m *Manifest) { m.Version = 2 }), "newer than this paddock reads"},
		{"older version", craft(t, good(), func(m *Manifest) { m.Version = 0 }), "reads version 1 only"},
		{"other format", craft(t, good(), func(m *Manifest) { m.Format = "tarball" }), "names format"},
		{"manifest not first", tarGz(t, append(good(), raw{name: ManifestName, data: manifestOf(t, good())})), "not manifest.json"},
		{"manifest lies about a size", craft(t, good(), func(m *Manifest) { m.Entries[1].Size++ }), "its manifest says"},
		{"manifest lies about a hash", craft(t, good(), func(m *Manifest) { m.Entries[1].SHA256 = strings.Repeat("0", 64) }), "SHA-256"},
		{"manifest lists a missing entry", craft(t, good(), func(m *Manifest) {
			m.Entries = append(m.Entries, ManifestEntry{Path: ClaudePrefix + "CLAUDE.md", Size: 1, SHA256: strings.Repeat("a", 64)})
		}), "cut short"},
		{"entry the manifest does not list", craft(t, with(raw{name: ClaudePrefix + "CLAUDE.md", data: []byte("a")}), func(m *Manifest) { m.Entries = m.Entries[:2] }), "after the last one"},
		{"entries out of order", tarGz(t, []raw{{name: ManifestName, data: manifestOf(t, good())}, good()[1], good()[0]}), "out of its order"},
		{"manifest without settings", craft(t, good()[1:], nil), "lists no session.json"},
		{"bad hash form", craft(t, good(), func(m *Manifest) { m.Entries[0].SHA256 = "xyz" }), "64 lowercase hex"},
		{"bad conversation id", craft(t, good(), func(m *Manifest) { m.Conversation = "../../x" }), "not a UUID"},
		{"unknown manifest field", tarGz(t, []raw{{name: ManifestName, data: []byte(`{"format":"paddock-session","version":1,"entries":[],"evil":1}`)}}), "unknown field"},
		{"transcript not JSON lines", craft(t, with(raw{name: ClaudePrefix + "projects/-workspace/a.jsonl", data: []byte("{}\nnot json\n")}), nil), "line 2 is not JSON"},
		{"config not an object", craft(t, with(raw{name: ClaudePrefix + "settings.json", data: []byte("[1]")}), nil), "not a JSON object"},
		{"settings with a bad egress", craft(t, []raw{{name: SettingsName, data: []byte(`{"name":"x","egress":"wide-open"}`)}}, nil), "egress"},
		{"settings with an unknown field", craft(t, []raw{{name: SettingsName, data: []byte(`{"name":"x","owner":{"uid":0}}`)}}, nil), "unknown field"},
		{"settings with a bad name", craft(t, []raw{{name: SettingsName, data: []byte(`{"name":"../x"}`)}}, nil), "session name"},
		{"decisions not JSON", craft(t, with(raw{name: DecisionsName, data: []byte("{}\n]\n")}), nil), "not a decision log entry"},
		{"truncated gzip", valid[:len(valid)/2], "cut short"},
		{"gzip without its trailer", valid[:len(valid)-4], "cut short"},
		{"empty", nil, "it is empty"},
		{"not gzip", []byte("PK\x03\x04 a zip file"), "not gzip-compressed"},
		{"short, not gzip", []byte("garbage\n"), "not gzip-compressed"},
		{"a gzip header's first byte only", []byte{0x1f}, "cut short"},
		{"damaged gzip", flip(valid, len(valid)-6), "damaged"},
		{"garbage after the gzip stream", append(append([]byte(nil), valid...), "garbage that is no gzip header"...), "gzip"},
		{"garbage after the tar stream", gzipOf(append(gunzip(t, valid), "garbage"...)), "after the end of its tar stream"},
		{"header claims more than there is", gzipOf(gunzip(t, valid)[:1500]), "cut short"},
		{"not a tar", gzipOf(bytes.Repeat([]byte("x"), 2000)), "damaged"},
	}
	return cases
}

func manifestOf(t testing.TB, entries []raw) []byte {
	m := Manifest{Format: Format, Version: Version}
	for _, e := range entries {
		sum := sha256.Sum256(e.data)
		m.Entries = append(m.Entries, ManifestEntry{Path: e.name, Size: int64(len(e.data)), SHA256: hex.EncodeToString(sum[:])})
	}
	b, _ := json.Marshal(m)
	return b
}

func manyEntries(n int) []raw {
	out := good()
	for i := range n {
		out = append(out, raw{name: ClaudePrefix + "plans/p" + strings.Repeat("x", i) + ".md", data: []byte("a")})
	}
	return out
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0xff
	return c
}

func gzipOf(b []byte) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	gz.Write(b)
	gz.Close()
	return buf.Bytes()
}

// small are limits the hostile cases meet with few bytes.
var small = Limits{MaxEntry: 2048, MaxTotal: 2560, MaxEntries: 20, MaxCompressed: 1 << 20}

// TestHostileFilesRefused: every hostile file is refused, with what is
// wrong in words, ErrInvalid, and no archive.
func TestHostileFilesRefused(t *testing.T) {
	if _, _, err := Read(bytes.NewReader(craft(t, good(), nil)), small); err != nil {
		t.Fatalf("the good file the cases start from: %v", err)
	}
	for _, tc := range hostile(t) {
		t.Run(tc.name, func(t *testing.T) {
			a, notes, err := Read(bytes.NewReader(tc.file), small)
			if err == nil {
				t.Fatalf("accepted: %+v", a)
			}
			if a != nil || notes != nil {
				t.Fatal("an archive came back with the error")
			}
			if !errors.Is(err, errdefs.ErrInvalid) {
				t.Errorf("not ErrInvalid: %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "nothing was imported") {
				t.Errorf("error %q does not say %q and that nothing was imported", err, tc.want)
			}
		})
	}
}

func TestCompressedCap(t *testing.T) {
	b := craft(t, append(good(), raw{name: ClaudePrefix + "CLAUDE.md", data: randomish(4096)}), nil)
	_, _, err := Read(bytes.NewReader(b), Limits{MaxCompressed: 1024})
	if err == nil || !strings.Contains(err.Error(), "more compressed bytes") {
		t.Fatalf("err = %v", err)
	}
}

func randomish(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = 'a' + byte(x%26)
	}
	return b
}

// TestWriteRefusesWhatReadWould: an export never writes a file an import
// refuses.
func TestWriteRefusesWhatReadWould(t *testing.T) {
	for name, mut := range map[string]func(*Archive){
		"traversal":        func(a *Archive) { a.Files = append(a.Files, File{Path: "../x", Data: []byte("x")}) },
		"credential file":  func(a *Archive) { a.Files = append(a.Files, File{Path: ".credentials.json", Data: []byte("{}")}) },
		"not carried":      func(a *Archive) { a.Files = append(a.Files, File{Path: "debug/x", Data: []byte("x")}) },
		"bad transcript":   func(a *Archive) { a.Files[0].Data = []byte("nope\n") },
		"bad conversation": func(a *Archive) { a.Manifest.Conversation = "x" },
		"bad settings":     func(a *Archive) { a.Settings.Egress = "open" },
		"negative limits":  func(a *Archive) { a.Settings.Limits.RPM = -1 },
		"duplicate file":   func(a *Archive) { a.Files = append(a.Files, a.Files[0]) },
		"too large a file": func(a *Archive) {
			a.Files = append(a.Files, File{Path: "CLAUDE.md", Data: make([]byte, DefaultLimits.MaxEntry+1)})
		},
		"file where dir is": func(a *Archive) { a.Files = append(a.Files, File{Path: "projects", Data: []byte("x")}) },
		"too long a line": func(a *Archive) {
			a.Files = append(a.Files, File{Path: "projects/p/long.jsonl", Data: bytes.Repeat([]byte("1"), int(DefaultLimits.MaxLine)+1)})
		},
		"too many lines": func(a *Archive) {
			a.Files = append(a.Files, File{Path: "projects/p/many.jsonl", Data: bytes.Repeat([]byte("{}\n"), DefaultLimits.MaxLines)})
		},
	} {
		t.Run(name, func(t *testing.T) {
			a := sample()
			mut(a)
			var buf bytes.Buffer
			if err := Write(&buf, a); err == nil || buf.Len() != 0 {
				t.Fatalf("Write: err %v, %d bytes written", err, buf.Len())
			}
		})
	}
}

func TestFromBox(t *testing.T) {
	files := []File{
		{Path: ".credentials.json", Data: []byte(`{"claudeAiOauth":{"accessToken":"` + apiKey + `"}}`)},
		{Path: "debug/x.txt", Data: []byte("log")},
		{Path: "projects/-workspace/" + conv + ".jsonl", Data: []byte("{\"type\":\"user\"}\nnot json\n{\"type\":\"assistant\",\"message\":{\"content\":\"cut")},
		{Path: ".claude.json", Data: []byte("{\"a\":")},
		{Path: "settings.json", Data: []byte(`{"env":{"GITHUB_TOKEN":"ghp_x","LANG":"C"}}`)},
	}
	got, notes := FromBox(files)
	if len(got) != 2 {
		t.Fatalf("kept %d files: %+v", len(got), got)
	}
	if string(got[0].Data) != "{\"type\":\"user\"}\n" {
		t.Errorf("transcript: %q", got[0].Data)
	}
	if bytes.Contains(got[1].Data, []byte("GITHUB_TOKEN")) || !bytes.Contains(got[1].Data, []byte("LANG")) {
		t.Errorf("settings: %s", got[1].Data)
	}
	all := strings.Join(notes, "\n")
	for _, want := range []string{"login file left out", "2 lines", ".claude.json: left out", "env GITHUB_TOKEN left out", "1 files that are not part"} {
		if !strings.Contains(all, want) {
			t.Errorf("notes lack %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, "ghp_x") || strings.Contains(all, apiKey) {
		t.Error("a note holds a secret")
	}
}

func TestConversationCheck(t *testing.T) {
	tx := []byte(`{"type":"user","message":{"content":"hi"}}` + "\n")
	ok := Conversation{ID: conv, Files: []File{{Path: conv + ".jsonl", Data: tx}, {Path: conv + "/subagents/agent-1.jsonl", Data: []byte("{}\n")}}}
	if err := ok.Check(); err != nil {
		t.Fatal(err)
	}
	files, _ := ok.ClaudeFiles("/workspace")
	if files[0].Path != "projects/-workspace/"+conv+".jsonl" || files[1].Path != "projects/-workspace/"+conv+"/subagents/agent-1.jsonl" {
		t.Fatalf("paths: %s %s", files[0].Path, files[1].Path)
	}
	for name, c := range map[string]Conversation{
		"bad id":          {ID: "../x", Files: ok.Files},
		"traversal":       {ID: conv, Files: []File{{Path: conv + ".jsonl", Data: tx}, {Path: conv + "/../../x", Data: tx}}},
		"other file":      {ID: conv, Files: []File{{Path: conv + ".jsonl", Data: tx}, {Path: "other.jsonl", Data: tx}}},
		"no transcript":   {ID: conv, Files: []File{{Path: conv + "/subagents/a.jsonl", Data: tx}}},
		"not JSON lines":  {ID: conv, Files: []File{{Path: conv + ".jsonl", Data: []byte("hello\n")}}},
		"no user message": {ID: conv, Files: []File{{Path: conv + ".jsonl", Data: []byte(`{"type":"summary"}` + "\n")}}},
		"twice":           {ID: conv, Files: []File{{Path: conv + ".jsonl", Data: tx}, {Path: conv + ".jsonl", Data: tx}}},
		"too large":       {ID: conv, Files: []File{{Path: conv + ".jsonl", Data: tx}, {Path: conv + "/x", Data: make([]byte, MaxConversation)}}},
		"credential":      {ID: conv, Files: []File{{Path: conv + ".jsonl", Data: tx}, {Path: conv + "/.credentials.json", Data: []byte("{}")}}},
	} {
		if err := c.Check(); err == nil || !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func TestReadHost(t *testing.T) {
	home := t.TempDir()
	cfg := filepath.Join(home, ".claude")
	ws := "/home/ann/src/my.proj"
	dir := filepath.Join(cfg, "projects", "-home-ann-src-my-proj")
	older, newer := "11111111-1111-4111-8111-111111111111", conv
	tx := []byte(`{"type":"user","message":{"content":"hi"},"cwd":"/home/ann/src/my.proj"}` + "\n")
	mustWrite(t, filepath.Join(dir, older+".jsonl"), tx)
	mustWrite(t, filepath.Join(dir, newer+".jsonl"), tx)
	mustWrite(t, filepath.Join(dir, newer, "subagents", "agent-1.jsonl"), []byte("{}\n"))
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, newer, "subagents", "evil.jsonl")); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(filepath.Join(dir, older+".jsonl"), old, old)

	c, warnings, err := ReadHost(HostOptions{ConfigDir: cfg, Cwds: []string{ws}, UID: -1})
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != newer || len(c.Files) != 2 || len(warnings) != 1 || !strings.Contains(warnings[0], "evil.jsonl") {
		t.Fatalf("newest: %s, %d files, warnings %q", c.ID, len(c.Files), warnings)
	}
	c, _, err = ReadHost(HostOptions{ConfigDir: cfg, Cwds: []string{ws}, ID: older, UID: -1})
	if err != nil || c.ID != older {
		t.Fatalf("named: %v %v", c, err)
	}
	// Named, had in another directory: found all the same.
	c, _, err = ReadHost(HostOptions{ConfigDir: cfg, Cwds: []string{"/elsewhere"}, ID: older, UID: -1})
	if err != nil || c.ID != older {
		t.Fatalf("named elsewhere: %v %v", c, err)
	}
	for name, o := range map[string]HostOptions{
		"no conversation here": {ConfigDir: cfg, Cwds: []string{"/nothing/here"}, UID: -1},
		"unknown id":           {ConfigDir: cfg, Cwds: []string{ws}, ID: "22222222-2222-4222-8222-222222222222", UID: -1},
		"bad id":               {ConfigDir: cfg, Cwds: []string{ws}, ID: "../../etc/passwd", UID: -1},
		"someone else's files": {ConfigDir: cfg, Cwds: []string{ws}, UID: os.Getuid() + 1},
		"no config dir":        {ConfigDir: filepath.Join(home, "nope"), Cwds: []string{ws}, UID: -1},
	} {
		if _, _, err := ReadHost(o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// A transcript that is a symlink is never followed.
	ln := "33333333-3333-4333-8333-333333333333"
	if err := os.Symlink(filepath.Join(dir, older+".jsonl"), filepath.Join(dir, ln+".jsonl")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadHost(HostOptions{ConfigDir: cfg, Cwds: []string{ws}, ID: ln, UID: -1}); err == nil {
		t.Error("read a transcript through a symlink")
	}
}

func mustWrite(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// bomb is a session file whose entries names hold line n times each:
// made a chunk at a time, so its data is never whole in memory, and the
// file is small (gzip of a line repeated).
func bomb(t testing.TB, names []string, line []byte, n int) []byte {
	t.Helper()
	chunk := bytes.Repeat(line, max(1, (1<<20)/len(line)))
	per := len(chunk) / len(line)
	each := func(f func([]byte)) {
		for left := n; left > 0; left -= per {
			f(chunk[:min(left, per)*len(line)])
		}
	}
	sum := sha256.New()
	each(func(b []byte) { sum.Write(b) })
	size := int64(n) * int64(len(line))
	m := Manifest{Format: Format, Version: Version, Conversation: conv, Entries: []ManifestEntry{
		{Path: SettingsName, Size: int64(len(settingsJSON)), SHA256: sha(settingsJSON)}}}
	for _, name := range names {
		m.Entries = append(m.Entries, ManifestEntry{Path: name, Size: size, SHA256: hex.EncodeToString(sum.Sum(nil))})
	}
	mb, _ := json.Marshal(m)
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	tw := tar.NewWriter(gz)
	for _, e := range []struct {
		name string
		data []byte
	}{{ManifestName, mb}, {SettingsName, settingsJSON}} {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: 0o600, Size: int64(len(e.data)), Format: tar.FormatPAX})
		tw.Write(e.data)
	}
	for _, name := range names {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o600, Size: size, Format: tar.FormatPAX})
		each(func(b []byte) { tw.Write(b) })
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// allocated is how many bytes f allocated on the heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestReadStreamsAndIsBounded: a small file that unpacks to a flood
// (127 MiB of "{}" lines in 126 KiB, as in issue 31) is refused while it
// streams in, at the bound it breaks, having allocated a few MiB, not
// what it unpacks to; so is a line over Limits.MaxLine and a decision
// log of more entries than Limits.MaxDecisions. Check refuses the same
// without keeping the entries. A file within the bounds still reads.
func TestReadStreamsAndIsBounded(t *testing.T) {
	tx := []string{ClaudePrefix + "projects/-workspace/" + conv + ".jsonl"}
	// Two transcripts of 63.5 MiB each, within the caps on bytes.
	flood := bomb(t, append(tx, ClaudePrefix+"projects/-workspace/"+conv+"/subagents/agent-a1.jsonl"), []byte("{}\n"), 127<<20/6)
	if len(flood) > 1<<20 {
		t.Fatalf("the flood is %d bytes compressed", len(flood))
	}
	for name, tc := range map[string]struct {
		file  []byte
		lim   Limits
		want  string
		bound uint64
	}{
		"a flood of lines":      {flood, Limits{}, "more than 1000000 lines in all", 24 << 20},
		"a line too long":       {bomb(t, tx, []byte("[1,"), 8<<20/3), Limits{MaxLine: 1 << 20}, "line 1 is longer than 1048576 bytes", 8 << 20},
		"too many decisions":    {bomb(t, []string{DecisionsName}, []byte("{}\n"), 2001), Limits{MaxDecisions: 2000}, "more than 2000 entries", 8 << 20},
		"a bad line, then more": {bomb(t, tx, []byte("{}\nnot json\n"), 20<<20/12), Limits{}, "line 2 is not JSON", 8 << 20},
	} {
		t.Run(name, func(t *testing.T) {
			for _, keep := range []bool{true, false} {
				var err error
				n := allocated(func() {
					if keep {
						_, _, err = Read(bytes.NewReader(tc.file), tc.lim)
					} else {
						_, err = Check(bytes.NewReader(tc.file), tc.lim)
					}
				})
				if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "nothing was imported") {
					t.Fatalf("keep %v: %v, want %q", keep, err, tc.want)
				}
				t.Logf("keep %v: refused after allocating %d KiB", keep, n>>10)
				if n > tc.bound*raceFactor {
					t.Errorf("keep %v: refused after allocating %d MiB, more than %d MiB", keep, n>>20, tc.bound*raceFactor>>20)
				}
			}
		})
	}
	// Within the bounds: read, and checked with no more than a chunk held.
	ok := bomb(t, tx, []byte(`{"type":"user"}`+"\n"), 200000)
	a, _, err := Read(bytes.NewReader(ok), Limits{})
	if err != nil || len(a.Files) != 1 || len(a.Files[0].Data) != 200000*16 || cap(a.Files[0].Data) != len(a.Files[0].Data) {
		t.Fatalf("a file within the bounds: %v", err)
	}
	if n := allocated(func() { _, err = Check(bytes.NewReader(ok), Limits{}) }); err != nil || n > 2<<20*raceFactor {
		t.Fatalf("Check of a file within the bounds: %v, %d KiB allocated", err, n>>10)
	}
}
