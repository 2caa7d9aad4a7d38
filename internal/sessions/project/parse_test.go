package project

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

func mustParse(t *testing.T, doc string) *File {
	t.Helper()
	f, err := Parse([]byte(doc))
	if err != nil {
		t.Fatalf("Parse(%q): %v", doc, err)
	}
	return f
}

// TestExamples: the two examples of docs/PROJECT.md (kept in testdata)
// parse to what they say.
func TestExamples(t *testing.T) {
	raw, err := os.ReadFile("testdata/go.toml")
	if err != nil {
		t.Fatal(err)
	}
	f := mustParse(t, string(raw))
	want := &File{
		Version: 1, Model: "opus", Effort: "high",
		Env:    map[string]string{"GOFLAGS": "-mod=mod", "CGO_ENABLED": "0"},
		Image:  Image{Packages: []string{"golang", "build-essential", "git"}},
		Setup:  Setup{Command: "go mod download", Allow: []string{"proxy.golang.org", "sum.golang.org:443"}, Timeout: 10 * time.Minute},
		Egress: Egress{Mode: "allowlist", Allow: []string{"proxy.golang.org", "sum.golang.org"}, Ask: true},
		Raw:    raw, Sum: Sum(raw),
	}
	if !reflect.DeepEqual(f, want) {
		t.Errorf("go.toml:\n got %+v\nwant %+v", f, want)
	}

	raw, err = os.ReadFile("testdata/vite.toml")
	if err != nil {
		t.Fatal(err)
	}
	f = mustParse(t, string(raw))
	want = &File{
		Version: 1, Ports: []int{5173},
		Env:    map[string]string{"NODE_ENV": "development", "VITE_API_URL": "http://localhost:8080"},
		Image:  Image{Dockerfile: "tools/paddock.Dockerfile"},
		Setup:  Setup{Command: "npm ci", Allow: []string{"registry.npmjs.org"}, Timeout: DefaultSetupTimeout},
		Egress: Egress{Mode: "anthropic"},
		Raw:    raw, Sum: Sum(raw),
	}
	if !reflect.DeepEqual(f, want) {
		t.Errorf("vite.toml:\n got %+v\nwant %+v", f, want)
	}
	// The docs show the same files.
	doc, err := os.ReadFile("../../../docs/PROJECT.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"testdata/go.toml", "testdata/vite.toml"} {
		b, _ := os.ReadFile(name)
		if !strings.Contains(string(doc), string(b)) {
			t.Errorf("docs/PROJECT.md does not show %s as it is", name)
		}
	}
}

// TestFields: each key alone, and what it parses to.
func TestFields(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want File
	}{
		{"", File{}},
		{"# only a comment\n", File{}},
		{"version = 1", File{}},
		{`model = "claude-opus-4-5[1m]"`, File{Model: "claude-opus-4-5[1m]"}},
		{`effort = "max"`, File{Effort: "max"}},
		{`env = { A = "1", _B = "", c9 = "x y" }`, File{Env: map[string]string{"A": "1", "_B": "", "c9": "x y"}}},
		{"[env]\nAUTHOR = \"Ann\"\nTOKENIZER_MODEL = \"bpe\"\nMAX_TOKENS = \"8\"\nNEXTAUTH_URL = \"http://localhost:3000\"\n",
			File{Env: map[string]string{"AUTHOR": "Ann", "TOKENIZER_MODEL": "bpe", "MAX_TOKENS": "8", "NEXTAUTH_URL": "http://localhost:3000"}}},
		{"ports = [1, 65535, 8080]", File{Ports: []int{1, 65535, 8080}}},
		{"ports = []", File{Ports: []int{}}},
		{"[image]\npackages = [\"g++\", \"libc6-dev\", \"python3.11\"]", File{Image: Image{Packages: []string{"g++", "libc6-dev", "python3.11"}}}},
		{"[image]\ndockerfile = \"./tools//x.Dockerfile\"", File{Image: Image{Dockerfile: "tools/x.Dockerfile"}}},
		{"[image]\ndockerfile = \"a/../Dockerfile\"", File{Image: Image{Dockerfile: "Dockerfile"}}},
		{"[setup]\ncommand = \"make deps\"", File{Setup: Setup{Command: "make deps", Timeout: DefaultSetupTimeout}}},
		{"[setup]\ncommand = \"make deps\"\ntimeout = \"1h\"\nallow = [\"*.example.com:8443\"]",
			File{Setup: Setup{Command: "make deps", Timeout: time.Hour, Allow: []string{"*.example.com:8443"}}}},
		{"[egress]\nmode = \"offline\"", File{Egress: Egress{Mode: "offline"}}},
		{"[egress]\nmode = \"anthropic\"\ndeny = [\"statsig.anthropic.com\"]", File{Egress: Egress{Mode: "anthropic", Deny: []string{"statsig.anthropic.com"}}}},
		{"[egress]\nmode = \"allowlist\"\nask = true", File{Egress: Egress{Mode: "allowlist", Ask: true}}},
		{"[egress]\nmode = \"allowlist\"\nallow = [\"github.com\", \"*.example.com\"]\ndeny = [\"gist.github.com\"]",
			File{Egress: Egress{Mode: "allowlist", Allow: []string{"github.com", "*.example.com"}, Deny: []string{"gist.github.com"}}}},
	} {
		f := mustParse(t, tc.doc)
		want := tc.want
		want.Version = CurrentVersion
		want.Raw = []byte(tc.doc)
		want.Sum = Sum([]byte(tc.doc))
		if !reflect.DeepEqual(*f, want) {
			t.Errorf("%q:\n got %+v\nwant %+v", tc.doc, *f, want)
		}
	}
}

// TestRefusals: every refusal, with the key it names and its reason.
func TestRefusals(t *testing.T) {
	long := strings.Repeat("a", MaxValue+1)
	for _, tc := range []struct {
		doc, want string
	}{
		// the file
		{strings.Repeat("#", MaxSize+1), "65537 bytes, more than the 65536"},
		{"model = \"\xff\"", "not UTF-8"},
		{"# \x1b[2J\nmodel = \"opus\"", ":1: holds the control character U+001B"},
		{"model = \"opus\"\n# \u202e evil", ":2: holds U+202E, which reorders text"},
		{"model = \"opus", ".paddock.toml:1: model: unexpected EOF"},
		{"model = 1", ".paddock.toml:1: model: the value is an integer; this key takes a string"},
		{"\n\nmodel = true", ".paddock.toml:3: model: the value is true or false; this key takes a string"},
		{"version = 2", "version: this paddock reads version 1 of .paddock.toml, the file says 2"},
		{"version = 0", "the file says 0"},
		// model, effort
		{`model = "opus 4"`, `model: model "opus 4" is not a model name`},
		{`model = "-x"`, "is not a model name"},
		{`effort = "huge"`, `effort: effort "huge" is not one of low, medium, high, xhigh, max`},
		// env
		{`env = { "A-B" = "1" }`, `env.A-B: not a variable name`},
		{`env = { "A B" = "1" }`, `env."A B": not a variable name`},
		{`env = { "1A" = "1" }`, `env.1A: not a variable name`},
		{`env = { "" = "1" }`, `env."": not a variable name`},
		{`env = { A = 1 }`, "env.A: the value is an integer; this key takes a string"},
		{`env = { A = { B = "1" } }`, "env.A: the value is a table; this key takes a string"},
		{`env = { PATH = "/x" }`, "env.PATH: paddock sets PATH (the box's PATH); a project file cannot change it"},
		{`env = { HOME = "/x" }`, "paddock sets HOME"},
		{`env = { http_proxy = "http://x" }`, "env.http_proxy: paddock sets HTTP_PROXY (the box's network path"},
		{`env = { No_Proxy = "*" }`, "paddock sets NO_PROXY"},
		{`env = { ANTHROPIC_BASE_URL = "http://x" }`, "paddock sets the ANTHROPIC_* variables (they choose claude's API and credential)"},
		{`env = { anthropic_model = "x" }`, "paddock sets the ANTHROPIC_* variables"},
		{`env = { CLAUDE_CODE_USE_BEDROCK = "1" }`, "paddock sets the CLAUDE_* variables"},
		{`env = { PADDOCK_X = "1" }`, "paddock sets the PADDOCK_* variables"},
		{`env = { NODE_TLS_REJECT_UNAUTHORIZED = "0" }`, "the box's TLS trust"},
		{`env = { GITHUB_TOKEN = "x" }`, "env.GITHUB_TOKEN: named like a secret (the word TOKEN); pass secrets with `paddock secret set` and --secret, never in a checked-in file"},
		{`env = { OPENAI_API_KEY = "x" }`, "named like a secret (the words API_KEY)"},
		{`env = { A = "` + long + `" }`, "the value is 4097 bytes, more than 4096"},
		{`env = { A = "a\u0000b" }`, "holds a NUL character"},
		{`env = { HELPER = "sk-ant-api03-abcdefghijklmnop" }`, "env.HELPER: the value looks like an Anthropic API key or token (sk-ant-…); pass secrets with `paddock secret set`"},
		{`env = { DATABASE_URL = "postgres://u:glpat-abcdefghijklmnopqrst@db" }`, "the value looks like a GitLab token"},
		// ports
		{"ports = [0]", "ports: 0 is not a port (1 to 65535)"},
		{"ports = [65536]", "65536 is not a port"},
		{"ports = [-80]", "-80 is not a port"},
		{"ports = [80, 81, 80]", "ports: 80 is listed twice"},
		{"ports = [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]", "ports: 17 ports, more than 16"},
		{`ports = ["80"]`, "ports: the value is a string; this key takes an integer"},
		{"ports = 80", "ports: the value is an integer; this key takes an array"},
		{"ports = [1.5]", "the value is a number with a fraction; this key takes an integer"},
		// image
		{"[image]\npackages = [\"Golang\"]", `image.packages: "Golang" is not a Debian package name`},
		{"[image]\npackages = [\"g\"]", `"g" is not a Debian package name`},
		{"[image]\npackages = [\"golang=2:1.19\"]", "no version or architecture"},
		{"[image]\npackages = [\"-x\"]", "is not a Debian package name"},
		{"[image]\npackages = [\"git\", \"git\"]", `image.packages: "git" is listed twice`},
		{"[image]\npackages = [\"git\"]\ndockerfile = \"Dockerfile\"", "image: give packages or dockerfile, not both"},
		{"[image]\ndockerfile = \"/etc/Dockerfile\"", `image.dockerfile: "/etc/Dockerfile" is an absolute path`},
		{"[image]\ndockerfile = \"../Dockerfile\"", `image.dockerfile: "../Dockerfile" leads out of the workspace`},
		{"[image]\ndockerfile = \"a/../../x\"", `"../x" leads out of the workspace`},
		{"[image]\ndockerfile = \"..\"", "leads out of the workspace"},
		{"[image]\ndockerfile = \".\"", "names the workspace itself"},
		{"[image]\ndockerfile = \"tools\\\\x\"", "holds a backslash"},
		{"image = \"x\"", ".paddock.toml:1: image: the value is a string; this key takes a table"},
		{"[[image]]\npackages = []", "image: the value is an array; this key takes a table"},
		// setup
		{"[setup]\nallow = [\"github.com\"]", "setup.allow: rules without setup.command"},
		{"[setup]\ntimeout = \"5m\"", "setup.timeout: a timeout without setup.command"},
		{"[setup]\ncommand = \"x\"\ntimeout = \"soon\"", `setup.timeout: "soon" is not a duration`},
		{"[setup]\ncommand = \"x\"\ntimeout = \"\"", `setup.timeout: "" is not a duration`},
		{"[setup]\ncommand = \"x\"\ntimeout = \"0s\"", "setup.timeout: 0s is not more than zero"},
		{"[setup]\ncommand = \"x\"\ntimeout = \"-1m\"", "is not more than zero"},
		{"[setup]\ncommand = \"x\"\ntimeout = \"2h\"", "setup.timeout: 2h0m0s is not between 0 and 1h0m0s"},
		{"[setup]\ncommand = \"   \"", "setup.command: is only spaces"},
		{"[setup]\ncommand = \"" + long + "\"", "setup.command: 4097 bytes, more than 4096"},
		{"[setup]\ncommand = \"a\\u0000\"", "setup.command: holds a NUL character"},
		{"[setup]\ncommand = \"npm config set //registry.npmjs.org/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123\"", "setup.command: holds what looks like an npm token"},
		{"[setup]\ncommand = \"x\"\nallow = [\"*\"]", `setup.allow: rule "*": only a leading "*." wildcard is allowed`},
		{"[setup]\ncommand = \"x\"\nallow = [\"10.0.0.1\"]", "is an address, not a name"},
		{"[setup]\ncommand = \"x\"\nallow = [\"a.com:0\"]", "bad port"},
		{"[setup]\ncommand = \"x\"\nallow = [\"*.com\"]", "is a public suffix"},
		// egress
		{"[egress]\nallow = [\"a.com\"]", "egress.mode: missing: allow, deny and ask need a mode"},
		{"[egress]\nmode = \"none\"", `egress.mode: "none" is not offline, anthropic or allowlist`},
		{"[egress]\nmode = \"offline\"\ndeny = [\"a.com\"]", "egress.mode: offline reaches nothing"},
		{"[egress]\nmode = \"anthropic\"\nallow = [\"a.com\"]", "egress.mode: anthropic allows the API only"},
		{"[egress]\nmode = \"anthropic\"\nask = true", "anthropic allows the API only"},
		{"[egress]\nmode = \"allowlist\"", "egress.allow: the allowlist is empty"},
		{"[egress]\nmode = \"allowlist\"\nallow = [\"a b\"]", `egress.allow: rule "a b"`},
		{"[egress]\nmode = \"allowlist\"\nask = true\ndeny = [\"*\"]", "egress.deny: rule \"*\""},
		{"[egress]\nmode = \"allowlist\"\nask = \"yes\"", "egress.ask: the value is a string; this key takes true or false"},
		{"[setup]\ncommand = \"x\"\ntimeout = 10", "setup.timeout: the value is an integer; this key takes a string"},
	} {
		_, err := Parse([]byte(tc.doc))
		if err == nil {
			t.Errorf("%.60q: accepted", tc.doc)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.60q:\n got %v\nwant %q in it", tc.doc, err, tc.want)
		}
		var pe *Error
		if !errors.As(err, &pe) || !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("%.60q: %T is not an *Error and ErrInvalid", tc.doc, err)
		}
		if strings.HasSuffix(err.Error(), "invalid argument") {
			t.Errorf("%.60q: the sentinel's text is left in the message: %v", tc.doc, err)
		}
	}
}

// TestUnknownKeys: a key a project file has not is refused by name, at
// the top level and in each table, with the keys its table takes.
func TestUnknownKeys(t *testing.T) {
	for doc, want := range map[string]string{
		"modle = \"opus\"":                             "modle: unknown key modle (the top level takes version, model, effort, env, ports, image, setup, egress",
		"[image]\npkgs = [\"x\"]":                      "image.pkgs: unknown key image.pkgs ([image] takes packages, dockerfile;",
		"[setup]\ncommand = \"x\"\nrun = \"y\"":        "setup.run: unknown key setup.run ([setup] takes command, allow, timeout;",
		"[egress]\nmode = \"offline\"\npolicy = \"x\"": "unknown key egress.policy ([egress] takes mode, allow, deny, ask;",
		"[mounts]\nsrc = \"/\"":                        "unknown keys mounts, mounts.src (the top level takes",
		"[image.extra]\nx = 1":                         "unknown keys image.extra, image.extra.x ([image] takes",
		"b = 1\na = 2":                                 "a: unknown keys a, b (",
		"\"a b\" = 1":                                  `unknown key "a b"`,
	} {
		_, err := Parse([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q:\n got %v\nwant %q in it", doc, err, want)
		}
		if err != nil && !strings.Contains(err.Error(), "see docs/PROJECT.md") {
			t.Errorf("%q: no pointer to the docs: %v", doc, err)
		}
	}
	var b strings.Builder
	for i := range 20 {
		b.WriteString("k" + string(rune('a'+i)) + " = 1\n")
	}
	if _, err := Parse([]byte(b.String())); err == nil || !strings.Contains(err.Error(), "and 12 more") {
		t.Errorf("twenty unknown keys: %v", err)
	}
}

// TestBadFiles: each testdata/bad_*.toml is refused with what its first
// line says ("# want: …").
func TestBadFiles(t *testing.T) {
	files, _ := filepath.Glob("testdata/bad_*.toml")
	if len(files) == 0 {
		t.Fatal("no testdata/bad_*.toml")
	}
	for _, p := range files {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		first, _, _ := strings.Cut(string(raw), "\n")
		want, ok := strings.CutPrefix(first, "# want: ")
		if !ok {
			t.Fatalf("%s: the first line is not # want: …", p)
		}
		if _, err := Parse(raw); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s:\n got %v\nwant %q in it", p, err, want)
		}
	}
}

// TestValidateAgain: what Parse returns validates again, and a field
// changed after Parse is checked by Validate.
func TestValidateAgain(t *testing.T) {
	raw, _ := os.ReadFile("testdata/go.toml")
	f := mustParse(t, string(raw))
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	f.Env["AWS_SECRET_ACCESS_KEY"] = "x"
	if err := f.Validate(); err == nil || !strings.Contains(err.Error(), "env.AWS_SECRET_ACCESS_KEY: named like a secret") {
		t.Errorf("Validate after a change: %v", err)
	}
}

// TestErrorsDoNotShowSecrets: a refused value never appears in the error.
func TestErrorsDoNotShowSecrets(t *testing.T) {
	for _, v := range []string{
		"sk-ant-oat01-SECRETSECRETSECRET", "ghp_SECRETSECRETSECRETSECRET", "AKIASECRETSECRETSECR",
		"-----BEGIN OPENSSH PRIVATE KEY-----SECRET",
	} {
		for _, doc := range []string{"env = { X = \"" + v + "\" }", "[setup]\ncommand = \"echo " + v + "\""} {
			_, err := Parse([]byte(doc))
			if err == nil {
				t.Errorf("%q: accepted", doc)
				continue
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("%q: the error shows the value: %v", doc, err)
			}
		}
	}
}

// TestShape: what nests deeper than a project file does is refused before
// the TOML reader sees it; dots and brackets inside strings and comments
// do not count.
func TestShape(t *testing.T) {
	for doc, want := range map[string]string{
		"a = " + strings.Repeat("[", 9) + strings.Repeat("]", 9):             ".paddock.toml:1: nests arrays and tables more than 8 deep",
		"\na = " + strings.Repeat("{b = ", 9) + "1" + strings.Repeat("}", 9): ".paddock.toml:2: nests arrays and tables more than 8 deep",
		strings.Repeat("a.", 257) + "b = 1":                                  "has more than 256 dotted keys",
		"m = \"\"\"\n.\n\"\"\"\n" + strings.Repeat("a.", 257) + "b = 1":      ".paddock.toml:4: has more than 256 dotted keys",
	} {
		if _, err := Parse([]byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%.40q: %v, want %q", doc, err, want)
		}
	}
	// 64 rules of five labels, comments and strings full of dots and
	// brackets, each kind of string.
	var b strings.Builder
	b.WriteString("# a.b.c.d [[[[[[[[[[ {{{{{{{{{{ " + strings.Repeat(".", 300) + "\n")
	b.WriteString("model = 'x.y.z[1m]'\n")
	b.WriteString("[env]\nA = \"\\\"" + strings.Repeat(".[{", 100) + "\"\n")
	b.WriteString("B = '''\n" + strings.Repeat(".[{", 100) + "\n'''\n")
	b.WriteString("C = \"\"\"\n\\\"\"\"" + strings.Repeat(".[{", 100) + "\"\"\"\"\"\n")
	b.WriteString("\"D\" = '" + strings.Repeat(".", 100) + "'\n")
	b.WriteString("[egress]\nmode = \"allowlist\"\nallow = [\n")
	for i := range 64 {
		fmt.Fprintf(&b, "  \"h%d.a.b.c.example.com:%d\", # %s\n", i, 1000+i, strings.Repeat(".", 20))
	}
	b.WriteString("]\n")
	f, err := Parse([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if f.Model != "x.y.z[1m]" || len(f.Egress.Allow) != 64 || f.Env["C"] != "\"\"\""+strings.Repeat(".[{", 100)+"\"\"" || f.Env["D"] != strings.Repeat(".", 100) {
		t.Errorf("parsed %+v", f)
	}
}

// TestParseIsFast: the shapes that made the TOML reader slow, at the
// largest size a project file may have, are answered at once (a 64 KiB
// file of "a.a.a…" held it for more than a minute).
func TestParseIsFast(t *testing.T) {
	fill := func(unit string) string { return strings.Repeat(unit, (MaxSize-64)/len(unit)) }
	for name, doc := range map[string]string{
		"dotted key":         fill("a.") + "b = 1",
		"nested tables":      "a = " + strings.Repeat("{b = ", MaxSize/12) + "1" + strings.Repeat("}", MaxSize/12),
		"nested arrays":      "a = " + strings.Repeat("[", MaxSize/3) + strings.Repeat("]", MaxSize/3),
		"table headers":      fill("[[a]]\n"),
		"empty tables":       "a = [" + fill("{},") + "]",
		"ports":              "ports = [" + fill("1,") + "]",
		"deepest and widest": "a = [[[[[[[[" + fill("1,") + "]]]]]]]]",
	} {
		start := time.Now()
		if _, err := Parse([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%s: %v", name, d)
		}
	}
}
