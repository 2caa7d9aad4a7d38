// What a project's Dockerfile may say: pure checks, no I/O.

package image

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// BaseArg is the build argument a project's Dockerfile gets: the id of
// the base paddock made (sha256:…), pinned.
const BaseArg = "PADDOCK_BASE"

// instruction is one logical line of a Dockerfile: its keyword in upper
// case, the rest as written, and the line it starts on.
type instruction struct {
	cmd, args string
	line      int
}

// parseDockerfile splits a Dockerfile into instructions as Docker's
// parser does: a parser directive (# escape=`) at the top chooses the
// escape character; a line ending in it goes on on the next; comment and
// blank lines are skipped, within a continued instruction too.
func parseDockerfile(src []byte) []instruction {
	escape := byte('\\')
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	var out []instruction
	var cur *instruction
	directives, n := true, 0
	for sc.Scan() {
		n++
		l := strings.TrimRight(sc.Text(), " \t\r")
		t := strings.TrimLeft(l, " \t")
		if directives {
			if m := directiveRe.FindStringSubmatch(t); m != nil {
				if strings.EqualFold(m[1], "escape") && (m[2] == "`" || m[2] == `\`) {
					escape = m[2][0]
				}
				continue
			}
			directives = false
		}
		if t == "" || t[0] == '#' {
			continue
		}
		cont := t[len(t)-1] == escape
		if cont {
			t = t[:len(t)-1]
		}
		if cur == nil {
			cmd, args, _ := strings.Cut(t, " ")
			if i := strings.IndexByte(cmd, '\t'); i >= 0 {
				cmd, args = cmd[:i], cmd[i+1:]+" "+args
			}
			cur = &instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: n}
		} else {
			cur.args += " " + strings.TrimSpace(t)
		}
		if !cont {
			out = append(out, *cur)
			cur = nil
		}
	}
	if cur != nil {
		out = append(out, *cur)
	}
	return out
}

// directiveRe is a parser directive: "# name=value" before anything else.
var directiveRe = regexp.MustCompile(`^#\s*([a-zA-Z][a-zA-Z0-9]*)\s*=\s*(.+?)\s*$`)

// pinnedRef is an image named by digest, with or without a tag
// (name[:tag]@sha256:<64 hex>): what a stage other than paddock's base
// may start from, or COPY --from.
var pinnedRef = regexp.MustCompile(`^[a-z0-9]+(?:[._/-][a-z0-9]+)*(?::[0-9]+)?(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?@sha256:[0-9a-f]{64}$`)

// isBaseArg reports whether an image is the base paddock passes.
func isBaseArg(img string) bool { return img == "${"+BaseArg+"}" || img == "$"+BaseArg }

// fromLine is what CheckDockerfile asks a first FROM to be.
const fromLine = "ARG " + BaseArg + " then FROM ${" + BaseArg + "}"

// CheckDockerfile refuses a project's Dockerfile that breaks the contract
// paddock builds it under, each refusal saying what to write instead:
//
//   - `ARG PADDOCK_BASE` comes before the first FROM, and that FROM is
//     `FROM ${PADDOCK_BASE}` or `FROM $PADDOCK_BASE` (optionally `AS
//     name`): paddock passes the base it made as that build argument;
//   - any other FROM, and any COPY --from, names a stage of the file,
//     the base again, or an image pinned by digest (name@sha256:…): a tag
//     floats, and the recipe's hash would not name what was built
//     (`scratch` is allowed: it is empty);
//   - the last stage is built on ${PADDOCK_BASE}, directly or through
//     earlier stages: paddock adds its own layers on top of it, which
//     need what that base holds;
//   - no VOLUME, HEALTHCHECK, STOPSIGNAL or ONBUILD: each would change
//     how boxes run, or run a step inside paddock's own part of the
//     build;
//   - no ADD of a URL unless network is NetworkDefault or NetworkHost:
//     the Docker daemon fetches it whatever network the build has.
//
// It does not check what the RUN steps do: they run in the build, not in
// a box, with the network given.
func CheckDockerfile(src []byte, network string) error {
	ins := parseDockerfile(src)
	var stages []stage
	argBase := false
	for _, in := range ins {
		where := fmt.Sprintf("line %d: %s %s", in.line, in.cmd, in.args)
		refuse := func(format string, a ...any) error {
			return fmt.Errorf("%s: %s: %w", where, fmt.Sprintf(format, a...), errdefs.ErrInvalid)
		}
		switch in.cmd {
		case "ARG":
			if len(stages) == 0 {
				name, _, _ := strings.Cut(in.args, "=")
				if strings.TrimSpace(name) == BaseArg {
					argBase = true
				}
			}
		case "FROM":
			st, err := checkFrom(in, stages, argBase)
			if err != nil {
				return refuse("%v", err)
			}
			stages = append(stages, st)
		case "COPY", "ADD":
			if len(stages) == 0 {
				return refuse("an instruction before the first FROM; start with %s", fromLine)
			}
			if err := checkCopy(in, stages, network); err != nil {
				return refuse("%v", err)
			}
		case "VOLUME":
			return refuse("VOLUME would give every box an anonymous Docker volume; a box keeps its data in its home volume and /workspace: remove the line")
		case "HEALTHCHECK":
			return refuse("HEALTHCHECK would run its command in every box, as the box's user; remove the line")
		case "STOPSIGNAL":
			return refuse("STOPSIGNAL would change how paddock stops a box (its guest stops cleanly on SIGTERM); remove the line")
		case "ONBUILD":
			return refuse("ONBUILD would run its step inside paddock's own part of the build, after your file; write the step itself instead")
		default:
			if len(stages) == 0 {
				return refuse("an instruction before the first FROM; start with %s", fromLine)
			}
		}
	}
	if len(stages) == 0 {
		return fmt.Errorf("no FROM: start with %s (paddock passes the base it made as that argument): %w", fromLine, errdefs.ErrInvalid)
	}
	if last := stages[len(stages)-1]; !last.onBase {
		return fmt.Errorf("line %d: FROM %s: the last stage is not built on ${%s}; paddock adds its own layers on top of the last stage, which need that base: build it FROM ${%s} (or a stage that is) and COPY --from the other stages what you need: %w",
			last.line, last.from, BaseArg, BaseArg, errdefs.ErrInvalid)
	}
	return nil
}

// stage is one FROM of a Dockerfile.
type stage struct {
	name   string // lower case; "" when unnamed
	from   string // the image or stage it starts from, as written
	onBase bool   // built on ${PADDOCK_BASE}, directly or through stages
	line   int
}

// checkFrom checks a FROM against the stages before it.
func checkFrom(in instruction, stages []stage, argBase bool) (stage, error) {
	fs := strings.Fields(in.args)
	for len(fs) > 0 && strings.HasPrefix(fs[0], "--platform=") {
		fs = fs[1:]
	}
	st := stage{line: in.line}
	switch {
	case len(fs) == 1:
	case len(fs) == 3 && strings.EqualFold(fs[1], "AS"):
		st.name = strings.ToLower(fs[2])
		if !stageNameRe.MatchString(st.name) {
			return st, fmt.Errorf("stage name %q is not a name (letters, digits, . _ -, starting with a letter)", fs[2])
		}
	default:
		return st, fmt.Errorf("write FROM IMAGE or FROM IMAGE AS NAME")
	}
	st.from = fs[0]
	img := fs[0]
	if len(stages) == 0 {
		if !isBaseArg(img) {
			return st, fmt.Errorf("the first FROM must be FROM ${%s}: paddock builds your steps on the base it made, passed as that build argument; write %s", BaseArg, fromLine)
		}
		if !argBase {
			return st, fmt.Errorf("${%s} is not declared: Docker passes a build argument to FROM only when an ARG before the first FROM declares it; write %s", BaseArg, fromLine)
		}
		st.onBase = true
		return st, nil
	}
	switch {
	case isBaseArg(img):
		st.onBase = true
	case strings.Contains(img, "$"):
		return st, fmt.Errorf("FROM may use no build argument but ${%s}: the image a stage starts from must be fixed by the file, or the recipe's hash would not name what was built; name it by digest (name@sha256:…) or use a stage of this file", BaseArg)
	case img == "scratch" || pinnedRef.MatchString(img):
	default:
		prev, ok := findStage(stages, img)
		if !ok {
			return st, fmt.Errorf("%q is neither a stage of this file nor an image pinned by digest: a tag floats; write FROM %s@sha256:<digest> (docker images --digests shows it), FROM ${%s}, or FROM a stage named earlier with AS", img, strings.SplitN(img, ":", 2)[0], BaseArg)
		}
		st.onBase = prev.onBase
	}
	return st, nil
}

// stageNameRe is a stage name as Docker accepts it.
var stageNameRe = regexp.MustCompile(`^[a-z][a-z0-9._-]*$`)

// findStage finds a stage by name (case-insensitive) among stages.
func findStage(stages []stage, name string) (stage, bool) {
	name = strings.ToLower(name)
	for _, s := range stages {
		if s.name != "" && s.name == name {
			return s, true
		}
	}
	return stage{}, false
}

// checkCopy checks a COPY or ADD: its --from names a stage, an earlier
// stage's index or a pinned image; an ADD of a URL needs a network.
func checkCopy(in instruction, stages []stage, network string) error {
	args := strings.TrimSpace(in.args)
	var flags, words []string
	if strings.HasPrefix(args, "[") {
		// The JSON form: flags come before the array.
		if err := json.Unmarshal([]byte(args), &words); err != nil {
			return fmt.Errorf("not a JSON array of strings: %v", err)
		}
	} else {
		fs := strings.Fields(args)
		for len(fs) > 0 && strings.HasPrefix(fs[0], "--") {
			flags, fs = append(flags, fs[0]), fs[1:]
		}
		rest := strings.Join(fs, " ")
		if strings.HasPrefix(rest, "[") {
			if err := json.Unmarshal([]byte(rest), &words); err != nil {
				return fmt.Errorf("not a JSON array of strings: %v", err)
			}
		} else {
			words = fs
		}
	}
	for _, f := range flags {
		from, ok := strings.CutPrefix(f, "--from=")
		if !ok {
			continue
		}
		if i, err := strconv.Atoi(from); err == nil {
			if i < 0 || i >= len(stages) {
				return fmt.Errorf("--from=%d is not an earlier stage (this file has %d before this line)", i, len(stages))
			}
			continue
		}
		if _, ok := findStage(stages, from); ok || pinnedRef.MatchString(from) {
			continue
		}
		return fmt.Errorf("--from=%s is neither a stage of this file nor an image pinned by digest: a tag floats; write --from=%s@sha256:<digest> or copy from a stage named earlier with AS", from, strings.SplitN(from, ":", 2)[0])
	}
	if in.cmd == "ADD" && network == NetworkNone && len(words) > 1 {
		for _, src := range words[:len(words)-1] {
			if strings.Contains(src, "://") || strings.HasPrefix(src, "git@") {
				return fmt.Errorf("ADD of %s fetches it from the network through the Docker daemon, which a build with network none must not reach: put the file in the Dockerfile's directory and COPY it, or build with --build-network default", src)
			}
		}
	}
	return nil
}
