// Package project reads a workspace's project file, .paddock.toml: the
// model, effort, environment, preview ports, image, setup command and
// egress a repository asks for its sessions, checked in beside its code.
//
// The file is host-side configuration that a box can write (a live
// workspace is the box's to write), so reading it is never enough to use
// it: the owner accepts exactly its bytes first, as direnv's `allow` does,
// and the AllowStore remembers what they accepted per workspace. A file
// that changed since is shown as a diff and refused until they accept it
// again (NotAllowedError).
//
// Parse is pure and does every check but those that need the workspace;
// Load reads the file from a workspace without following a link and checks
// what names a path in it. docs/PROJECT.md is the reference of the file.
package project

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/BurntSushi/toml"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// FileName is the project file's name, in the workspace's top directory.
const FileName = ".paddock.toml"

// CurrentVersion is the format this paddock reads; a file without a
// version key is read as this one.
const CurrentVersion = 1

// MaxSize is the largest project file paddock reads, in bytes.
const MaxSize = 64 << 10

// Limits of the lists and strings of a file, so that what a box wrote
// cannot make the Runner hold or show much.
const (
	MaxPorts    = 16
	MaxPackages = 128
	MaxEnv      = 128
	MaxRules    = 64
	// MaxValue bounds an environment variable's value and the setup command.
	MaxValue = 4096
	// MaxSetupTimeout bounds setup.timeout; DefaultSetupTimeout is used
	// when a setup command gives none.
	MaxSetupTimeout     = time.Hour
	DefaultSetupTimeout = 10 * time.Minute
)

// File is a parsed, validated project file. Fields the file leaves out
// are zero, which means "the file asks for nothing here": the caller's
// flags or the Runner's defaults apply.
type File struct {
	// Version is the file's format (CurrentVersion when it says none).
	Version int
	// Model and Effort are claude's, as paddock run's --model and --effort
	// (session.ValidModel, session.ValidEffort).
	Model  string
	Effort string
	// Env are plain variables for the box's processes. Never secrets:
	// names and values that look like one are refused (see envRefusal).
	Env map[string]string
	// Ports are box ports to publish as previews, in the file's order.
	Ports []int
	Image Image
	Setup Setup
	// Egress is the session's network posture; Mode "" leaves it to the
	// caller.
	Egress Egress
	// Raw is the file as read. DockerfileText is the Dockerfile that
	// Image.Dockerfile names, as Load read it (nil from Parse, or with
	// none): it says what runs in the image's build, so the owner
	// accepts it with the file. Sum is the hex SHA-256 of Accepted(),
	// what the owner's acceptance is recorded against (AllowStore).
	Raw            []byte
	DockerfileText []byte
	Sum            string
}

// Accepted is what the owner accepts: the file's bytes, followed, when
// it names a Dockerfile that Load read, by a line naming it with both
// lengths (so the two parts cannot be told apart any other way) and the
// Dockerfile's bytes.
func (f *File) Accepted() []byte {
	if f.DockerfileText == nil {
		return f.Raw
	}
	var b bytes.Buffer
	b.Write(f.Raw)
	if len(f.Raw) > 0 && f.Raw[len(f.Raw)-1] != '\n' {
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "# ---- %s, image.dockerfile (%d bytes of %s above, %d bytes of it below) ----\n", f.Image.Dockerfile, len(f.Raw), FileName, len(f.DockerfileText))
	b.Write(f.DockerfileText)
	return b.Bytes()
}

// Image says what the session's image needs beyond paddock's own. At
// most one of the two is set.
type Image struct {
	// Packages are Debian package names to install.
	Packages []string
	// Dockerfile is a slash-separated path, cleaned and relative to the
	// workspace's top directory. Load checks that it names a regular
	// file inside the workspace when it reads the file; whoever reads the
	// Dockerfile later must open it inside the workspace again (os.Root),
	// as the box may have changed the tree since.
	Dockerfile string
}

// Setup is a command run once in the box when the session is created.
type Setup struct {
	// Command is run with bash -lc in the box; "" means no setup.
	Command string
	// Allow are NAME[:PORT] egress rules (egress.ParseRule) open only
	// while the command runs, whatever the session's own posture.
	Allow []string
	// Timeout bounds the command (DefaultSetupTimeout when the file gives
	// none; zero when there is no command).
	Timeout time.Duration
}

// Egress is the session's network posture, as paddock run's --egress,
// --allow, --deny and --ask.
type Egress struct {
	// Mode is "" (the file says nothing), "offline", "anthropic" or
	// "allowlist" (session.EgressOffline, …).
	Mode string
	// Allow and Deny are NAME[:PORT] rules as written (egress.ParseRule);
	// Allow and Ask need Mode "allowlist".
	Allow []string
	Deny  []string
	Ask   bool
}

// Error is a problem with a project file: the line where the TOML library
// knows it, the dotted key where there is one, and what is wrong. Every
// Error is an errdefs.ErrInvalid.
type Error struct {
	Line int
	Key  string
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(FileName)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap makes every Error an errdefs.ErrInvalid.
func (e *Error) Unwrap() error { return errdefs.ErrInvalid }

// fileTOML is the file as TOML decodes it; every key the file may hold is
// here, so that any other is left undecoded and refused.
type fileTOML struct {
	Version *int              `toml:"version"`
	Model   string            `toml:"model"`
	Effort  string            `toml:"effort"`
	Env     map[string]string `toml:"env"`
	Ports   []int             `toml:"ports"`
	Image   struct {
		Packages   []string `toml:"packages"`
		Dockerfile string   `toml:"dockerfile"`
	} `toml:"image"`
	Setup struct {
		Command string   `toml:"command"`
		Allow   []string `toml:"allow"`
		Timeout string   `toml:"timeout"`
	} `toml:"setup"`
	Egress struct {
		Mode  string   `toml:"mode"`
		Allow []string `toml:"allow"`
		Deny  []string `toml:"deny"`
		Ask   bool     `toml:"ask"`
	} `toml:"egress"`
}

// keys lists the keys of each table (top level: ""), for the message on
// an unknown one.
var keys = map[string][]string{
	"":       {"version", "model", "effort", "env", "ports", "image", "setup", "egress"},
	"image":  {"packages", "dockerfile"},
	"setup":  {"command", "allow", "timeout"},
	"egress": {"mode", "allow", "deny", "ask"},
}

// Sum returns the hex SHA-256 of raw, as File.Sum.
func Sum(raw []byte) string {
	s := sha256.Sum256(raw)
	return hex.EncodeToString(s[:])
}

// Parse reads and validates a project file's bytes. It touches no file:
// Load adds the checks that need the workspace. Every error is an *Error
// (an errdefs.ErrInvalid) whose message says what is wrong and, where it
// can, the line; no message holds a value that was refused as a secret.
// Parse never panics, whatever the bytes. The File's Raw is a copy of raw.
func Parse(raw []byte) (*File, error) {
	if len(raw) > MaxSize {
		return nil, &Error{Msg: fmt.Sprintf("%d bytes, more than the %d a project file may have", len(raw), MaxSize)}
	}
	if err := checkText(raw); err != nil {
		return nil, err
	}
	if err := checkShape(raw); err != nil {
		return nil, err
	}
	var t fileTOML
	md, err := toml.NewDecoder(bytes.NewReader(raw)).Decode(&t)
	if err != nil {
		return nil, decodeError(err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		return nil, unknownKeys(und)
	}
	f := &File{
		Version: CurrentVersion,
		Model:   t.Model,
		Effort:  t.Effort,
		Env:     t.Env,
		Ports:   t.Ports,
		Image:   Image{Packages: t.Image.Packages, Dockerfile: t.Image.Dockerfile},
		Setup:   Setup{Command: t.Setup.Command, Allow: t.Setup.Allow},
		Egress:  Egress{Mode: t.Egress.Mode, Allow: t.Egress.Allow, Deny: t.Egress.Deny, Ask: t.Egress.Ask},
		Raw:     bytes.Clone(raw),
	}
	if f.Raw == nil {
		f.Raw = []byte{}
	}
	f.Sum = Sum(f.Raw)
	if t.Version != nil {
		f.Version = *t.Version
	}
	if f.Image.Dockerfile != "" {
		// Cleaned here, checked in Validate: "./tools/x" and "tools/x"
		// are one path; "a/../../x" cleans to "../x", refused there.
		f.Image.Dockerfile = cleanSlash(f.Image.Dockerfile)
	}
	if md.IsDefined("setup", "timeout") {
		d, err := time.ParseDuration(t.Setup.Timeout)
		if err != nil {
			return nil, &Error{Key: "setup.timeout", Msg: fmt.Sprintf("%q is not a duration like \"90s\" or \"10m\"", clip(t.Setup.Timeout))}
		}
		if d <= 0 {
			return nil, &Error{Key: "setup.timeout", Msg: fmt.Sprintf("%s is not more than zero", clip(t.Setup.Timeout))}
		}
		f.Setup.Timeout = d
	} else if f.Setup.Command != "" {
		f.Setup.Timeout = DefaultSetupTimeout
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return f, nil
}

// checkText refuses what is not plain UTF-8 text: invalid UTF-8, control
// characters but tab, newline and carriage return (they would act on the
// terminal that shows the file's diff), and the Unicode controls that
// reorder text on screen (U+202A–U+202E, U+2066–U+2069: what the owner
// reads when they accept the file must be what it says).
func checkText(raw []byte) error {
	if !utf8.Valid(raw) {
		return &Error{Msg: "not UTF-8 text"}
	}
	line := 1
	for _, r := range string(raw) {
		switch {
		case r == '\n':
			line++
		case r == '\t' || r == '\r':
		case r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0:
			return &Error{Line: line, Msg: fmt.Sprintf("holds the control character %U; a project file is plain text", r)}
		case r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069:
			return &Error{Line: line, Msg: fmt.Sprintf("holds %U, which reorders text on screen, so the file would not read as what it says", r)}
		}
	}
	return nil
}

// Bounds of checkShape. A project file needs one level of brackets
// (an array, the env table) and a few dotted keys; the TOML reader takes
// time that grows faster than the square of the depth of keys and tables
// (a 64 KiB file of "a.a.a…" held it for more than a minute).
const (
	maxDepth = 8
	maxDots  = 256
)

// checkShape refuses, before the TOML reader sees them, files whose keys
// or tables nest deeper than a project file ever does: more than maxDepth
// brackets and braces open at once, or more than maxDots dots outside
// strings and comments. It reads strings and comments as TOML does
// (basic, literal and multi-line strings, escapes), so that the dots of
// a host name or a version in a string do not count; a file it misreads
// is one the TOML reader refuses anyway.
func checkShape(raw []byte) error {
	depth, dots, line := 0, 0, 1
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; c {
		case '\n':
			line++
		case '#':
			for i+1 < len(raw) && raw[i+1] != '\n' {
				i++
			}
		case '"', '\'':
			var nl int
			i, nl = skipString(raw, i)
			line += nl
		case '[', '{':
			if depth++; depth > maxDepth {
				return &Error{Line: line, Msg: fmt.Sprintf("nests arrays and tables more than %d deep; a project file needs one or two", maxDepth)}
			}
		case ']', '}':
			depth = max(depth-1, 0)
		case '.':
			if dots++; dots > maxDots {
				return &Error{Line: line, Msg: fmt.Sprintf("has more than %d dotted keys; a project file needs a few", maxDots)}
			}
		}
	}
	return nil
}

// skipString returns the index of the last byte of the string that
// starts at raw[i] (a quote), and the newlines in it. An unterminated
// string ends at the end of its line (single-line) or of the file.
func skipString(raw []byte, i int) (end, newlines int) {
	q := raw[i]
	if i+2 < len(raw) && raw[i+1] == q && raw[i+2] == q {
		for j := i + 3; j < len(raw); j++ {
			switch {
			case raw[j] == '\n':
				newlines++
			case q == '"' && raw[j] == '\\':
				if j+1 < len(raw) && raw[j+1] == '\n' {
					newlines++
				}
				j++
			case raw[j] == q && j+2 < len(raw) && raw[j+1] == q && raw[j+2] == q:
				// Up to two more quotes belong to the string: """a""""".
				j += 2
				for n := 0; n < 2 && j+1 < len(raw) && raw[j+1] == q; n++ {
					j++
				}
				return j, newlines
			}
		}
		return len(raw) - 1, newlines
	}
	for j := i + 1; j < len(raw); j++ {
		switch {
		case raw[j] == '\n':
			return j - 1, newlines // the newline is the caller's to count
		case q == '"' && raw[j] == '\\' && j+1 < len(raw) && raw[j+1] != '\n':
			j++
		case raw[j] == q:
			return j, newlines
		}
	}
	return len(raw) - 1, newlines
}

// decodeError turns the TOML library's errors into *Error with a line
// and the last key it read: its syntax errors (toml.ParseError), and the
// errors of a value of the wrong type, which it gives as text only
// ("toml: line 3 (last key \"model\"): incompatible types: …").
func decodeError(err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return &Error{Line: pe.Position.Line, Key: pe.LastKey, Msg: pe.Message}
	}
	m := typeError.FindStringSubmatch(err.Error())
	if m == nil {
		return &Error{Msg: strings.TrimPrefix(err.Error(), "toml: ")}
	}
	e := &Error{Msg: m[3]}
	e.Line, _ = strconv.Atoi(m[1])
	if k, err := strconv.Unquote(`"` + m[2] + `"`); err == nil {
		e.Key = k
	}
	if t := wrongType.FindStringSubmatch(m[3]); t != nil {
		e.Msg = fmt.Sprintf("the value is %s; this key takes %s", tomlType(t[1]), tomlType(t[2]))
	} else if t := wrongTable.FindStringSubmatch(m[3]); t != nil {
		e.Msg = fmt.Sprintf("the value is %s; this key takes a table", tomlType(t[1]))
	}
	return e
}

var (
	// typeError is the text of the TOML library's error for a value of
	// the wrong type: its line, its key (quoted), what it says.
	typeError = regexp.MustCompile(`(?s)^toml: (?:line (\d+) )?\(last key "((?:[^"\\]|\\.)*)"\): (.*)$`)
	// wrongType and wrongTable are what it says, with the types.
	wrongType  = regexp.MustCompile(`^incompatible types: TOML value has type (.*); destination has type (.*)$`)
	wrongTable = regexp.MustCompile(`^type mismatch for .*: expected table but found (.*)$`)
)

// tomlType names, for a person, a type as the TOML library writes it:
// Go's type of a decoded value, or its word for a destination.
func tomlType(t string) string {
	switch {
	case t == "string" || t == "primitive (string-like)":
		return "a string"
	case t == "int64" || t == "integer":
		return "an integer"
	case t == "float64" || t == "float":
		return "a number with a fraction"
	case t == "bool" || t == "boolean":
		return "true or false"
	case strings.HasPrefix(t, "[]") || t == "slice":
		return "an array"
	case strings.HasPrefix(t, "map[") || t == "map":
		return "a table"
	case strings.Contains(t, "time.") || strings.Contains(t, "toml.Local"):
		return "a date or time"
	}
	return t
}

// unknownKeys names every key the file holds that a project file has not,
// with the keys its table takes.
func unknownKeys(und []toml.Key) error {
	names := make([]string, 0, len(und))
	for _, k := range und {
		names = append(names, k.String())
	}
	sort.Strings(names)
	names = slices.Compact(names) // [[a]] twice is one unknown key
	first := und[0]
	for _, k := range und {
		if k.String() == names[0] {
			first = k
		}
	}
	table := ""
	if len(first) > 1 {
		table = first[0]
	}
	takes := "the top level takes " + strings.Join(keys[""], ", ")
	if ks, ok := keys[table]; ok && table != "" {
		takes = "[" + table + "] takes " + strings.Join(ks, ", ")
	}
	word := "unknown key"
	if len(names) > 1 {
		word = "unknown keys"
	}
	shown := names
	if len(shown) > 8 {
		shown = append(slices.Clip(shown[:8]), fmt.Sprintf("and %d more", len(names)-8))
	}
	for i, n := range shown {
		shown[i] = clip(n)
	}
	return &Error{Key: clip(names[0]), Msg: fmt.Sprintf("%s %s (%s; see docs/PROJECT.md)", word, strings.Join(shown, ", "), takes)}
}

// clip shortens s for a message.
func clip(s string) string {
	if len(s) <= 80 {
		return s
	}
	cut := 77
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
