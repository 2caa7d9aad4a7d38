package portable

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/paddockhq/paddock/internal/credentials/secret"
	"github.com/paddockhq/paddock/internal/sessions/boxfiles"
)

// What of ~/.claude travels: these files at its top, and the trees under
// these directories. Everything else stays behind (docs/PORTABLE.md):
// .credentials.json above all, and what Claude Code remakes or what is
// the host's, not the conversation's (debug logs, shell snapshots, the
// session environment, caches, statsig, plugins, backups of .claude.json
// holding what the sanitizing below takes out).
var (
	claudeFiles = map[string]bool{".claude.json": true, "settings.json": true, "history.jsonl": true, "CLAUDE.md": true}
	claudeDirs  = map[string]bool{"projects": true, "todos": true, "plans": true, "file-history": true,
		"agents": true, "commands": true, "skills": true, "output-styles": true}
)

// CredentialFile is Claude Code's login file: never carried, wherever it is.
const CredentialFile = ".credentials.json"

// CarriedTops lists what of ~/.claude travels, files then directories,
// sorted: what an export reads of a box.
func CarriedTops() []string {
	var out []string
	for f := range claudeFiles {
		out = append(out, f)
	}
	for d := range claudeDirs {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// CheckClaudePath checks the path of a File: clean and relative
// (boxfiles.CheckPath), under a file or directory that travels, and not
// a credential file.
func CheckClaudePath(p string) error {
	if err := boxfiles.CheckPath(p); err != nil {
		return err
	}
	top, rest, isDir := strings.Cut(p, "/")
	switch {
	case path.Base(p) == CredentialFile:
		return bad("%s: a Claude Code login file; it never travels", clip(p))
	case isDir && claudeDirs[top] && rest != "":
	case !isDir && claudeFiles[top]:
	default:
		return bad("%s: not part of the Claude Code state a session file carries (%s)", clip(p), strings.Join(CarriedTops(), ", "))
	}
	return nil
}

// checkContent checks a File's data by its kind: JSON lines for .jsonl
// (each line within DefaultLimits.MaxLine), a JSON object for
// .claude.json and settings.json, JSON for other .json.
func checkContent(p string, data []byte) error {
	return checkData(ClaudePrefix+p, data, DefaultLimits, nil)
}

// credentialShaped finds what looks like a credential: a paddock session
// token, an Anthropic API key or OAuth token.
var credentialShaped = regexp.MustCompile(regexp.QuoteMeta(secret.TokenPrefix) + `[A-Za-z0-9_-]{8,}|sk-ant-[A-Za-z0-9_-]{8,}`)

// Redact returns b with every credential-shaped string replaced by
// secret.Redacted, and how many it replaced. The replacement has no
// character JSON escapes, so JSON stays JSON. b itself is not written to.
func Redact(b []byte) ([]byte, int) {
	if !bytes.Contains(b, []byte(secret.TokenPrefix)) && !bytes.Contains(b, []byte("sk-ant-")) {
		return b, 0
	}
	n := 0
	out := credentialShaped.ReplaceAllFunc(b, func([]byte) []byte { n++; return []byte(secret.Redacted) })
	return out, n
}

// Keys dropped from .claude.json and settings.json: those that hold a
// credential or an account's identity, or run a command that fetches one.
var (
	claudeJSONDrop = []string{"primaryApiKey", "customApiKeyResponses", "oauthAccount"}
	settingsDrop   = []string{"apiKeyHelper", "awsAuthRefresh", "awsCredentialExport", "otelHeadersHelper"}
)

// secretName reports whether an environment variable's name says it holds
// a secret (settings.json "env").
func secretName(k string) bool {
	u := strings.ToUpper(k)
	for _, w := range []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH"} {
		if strings.Contains(u, w) {
			return true
		}
	}
	return false
}

// sanitize takes out of one file what must never travel (the keys above,
// credential-shaped strings) and returns the rest, with notes saying what
// went (names only, never a value).
func sanitize(p string, data []byte) ([]byte, []string) {
	var notes []string
	var drop []string
	switch p {
	case ".claude.json":
		drop = claudeJSONDrop
	case "settings.json":
		drop = settingsDrop
	}
	if drop != nil {
		if doc, ok := decodeObject(data); ok {
			changed := false
			for _, k := range drop {
				if _, ok := doc[k]; ok {
					delete(doc, k)
					changed = true
					notes = append(notes, fmt.Sprintf("%s: %s left out", p, k))
				}
			}
			if env, ok := doc["env"].(map[string]any); ok && p == "settings.json" {
				for k, v := range env {
					s, _ := v.(string)
					if secretName(k) || credentialShaped.MatchString(s) {
						delete(env, k)
						changed = true
						notes = append(notes, fmt.Sprintf("%s: env %s left out", p, clip(k)))
					}
				}
			}
			if changed {
				if b, err := json.MarshalIndent(doc, "", "  "); err == nil {
					data = b
				}
			}
		}
	}
	data, n := Redact(data)
	if n > 0 {
		notes = append(notes, fmt.Sprintf("%s: %d credential-shaped strings replaced by %s", clip(p), n, secret.Redacted))
	}
	sort.Strings(notes)
	return data, notes
}

// decodeObject decodes b, one JSON object and nothing after it, numbers
// kept as written.
func decodeObject(b []byte) (map[string]any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil || doc == nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return doc, true
}

// FromBox makes the Files of an export from what was read of a box's
// ~/.claude (paths relative to it), leniently: what does not travel is
// left out, a JSON lines file loses a last line cut short (claude may be
// writing it) and lines that are not JSON, a config that is not a JSON
// object is left out (the import seeds a new one); then every file is
// sanitized. The notes say what was left out or changed, by name.
func FromBox(files []File) ([]File, []string) {
	var out []File
	var notes []string
	skipped := 0
	for _, f := range files {
		if err := CheckClaudePath(f.Path); err != nil {
			if path.Base(f.Path) == CredentialFile {
				notes = append(notes, f.Path+": Claude Code's login file left out")
			} else {
				skipped++
			}
			continue
		}
		if strings.HasSuffix(f.Path, ".jsonl") {
			var dropped int
			f.Data, dropped = jsonLines(f.Data)
			if dropped > 0 {
				notes = append(notes, fmt.Sprintf("%s: %d lines that were not JSON (or cut short) left out", clip(f.Path), dropped))
			}
		}
		if err := checkContent(f.Path, f.Data); err != nil {
			notes = append(notes, fmt.Sprintf("%s: left out: %v", clip(f.Path), err))
			continue
		}
		var ns []string
		f.Data, ns = sanitize(f.Path, f.Data)
		notes = append(notes, ns...)
		out = append(out, f)
	}
	if skipped > 0 {
		notes = append(notes, fmt.Sprintf("%d files that are not part of the conversation's state left out", skipped))
	}
	out, ns := tidy(out)
	return out, append(notes, ns...)
}

// tidy makes files a set a session file can hold: a path twice keeps its
// last copy (as tar does), and a file that stands where another needs a
// directory is left out.
func tidy(files []File) ([]File, []string) {
	last := make(map[string]int, len(files))
	for i, f := range files {
		last[f.Path] = i
	}
	var out []File
	var notes []string
	for i, f := range files {
		if last[f.Path] != i {
			continue
		}
		out = append(out, f)
	}
	isDir := map[string]bool{}
	for _, f := range out {
		for d := path.Dir(f.Path); d != "."; d = path.Dir(d) {
			isDir[d] = true
		}
	}
	kept := out[:0]
	for _, f := range out {
		if isDir[f.Path] {
			notes = append(notes, clip(f.Path)+": a file where a directory is, left out")
			continue
		}
		kept = append(kept, f)
	}
	return kept, notes
}

// jsonLines keeps the lines of b that are JSON, each ending in a newline;
// a last line with no newline is taken as cut short. It returns how many
// non-blank lines it dropped.
func jsonLines(b []byte) ([]byte, int) {
	var out bytes.Buffer
	dropped := 0
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(bytes.TrimSpace(b)) > 0 {
				dropped++
			}
			break
		}
		line := b[:i]
		b = b[i+1:]
		switch {
		case len(bytes.TrimSpace(line)) == 0:
		case json.Valid(line):
			out.Write(line)
			out.WriteByte('\n')
		default:
			dropped++
		}
	}
	return out.Bytes(), dropped
}
