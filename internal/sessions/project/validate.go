package project

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/proxy/egress"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// debianPackage is Debian policy's package name (§5.6.1): lower case
// letters, digits, '+', '-' and '.', at least two, starting with a letter
// or digit. A version or an architecture (golang=2:1.19, gcc:arm64) is
// not a name.
var debianPackage = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)

// Validate checks every field of f but Raw and Sum, and what needs the
// workspace (Load does that). Parse calls it; a File that Parse returned
// validates again unchanged. Errors are *Error.
func (f *File) Validate() error {
	if f.Version != CurrentVersion {
		return &Error{Key: "version", Msg: fmt.Sprintf("this paddock reads version %d of %s, the file says %d: update paddock, or write the file for version %d", CurrentVersion, FileName, f.Version, CurrentVersion)}
	}
	if err := session.ValidModel(f.Model); err != nil {
		return &Error{Key: "model", Msg: plain(err)}
	}
	if err := session.ValidEffort(f.Effort); err != nil {
		return &Error{Key: "effort", Msg: plain(err)}
	}
	if err := validEnv(f.Env); err != nil {
		return err
	}
	if err := validPorts(f.Ports); err != nil {
		return err
	}
	if err := f.Image.validate(); err != nil {
		return err
	}
	if err := f.Setup.validate(); err != nil {
		return err
	}
	return f.Egress.validate()
}

// validEnv checks each variable's name and value (envRefusal), in name
// order so that the error is the same whatever the map's order.
func validEnv(env map[string]string) error {
	if len(env) > MaxEnv {
		return &Error{Key: "env", Msg: fmt.Sprintf("%d variables, more than %d", len(env), MaxEnv)}
	}
	names := make([]string, 0, len(env))
	for n := range env {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if why := envRefusal(n, env[n]); why != "" {
			return &Error{Key: "env." + quoteKey(n), Msg: why}
		}
	}
	return nil
}

// validPorts: each port 1..65535, no port twice, at most MaxPorts.
func validPorts(ports []int) error {
	if len(ports) > MaxPorts {
		return &Error{Key: "ports", Msg: fmt.Sprintf("%d ports, more than %d", len(ports), MaxPorts)}
	}
	for i, p := range ports {
		if p < 1 || p > 65535 {
			return &Error{Key: "ports", Msg: fmt.Sprintf("%d is not a port (1 to 65535)", p)}
		}
		if slices.Contains(ports[:i], p) {
			return &Error{Key: "ports", Msg: fmt.Sprintf("%d is listed twice", p)}
		}
	}
	return nil
}

func (im Image) validate() error {
	if len(im.Packages) > 0 && im.Dockerfile != "" {
		return &Error{Key: "image", Msg: "give packages or dockerfile, not both: install the packages in the Dockerfile"}
	}
	if len(im.Packages) > MaxPackages {
		return &Error{Key: "image.packages", Msg: fmt.Sprintf("%d packages, more than %d", len(im.Packages), MaxPackages)}
	}
	for i, p := range im.Packages {
		if len(p) > 100 || !debianPackage.MatchString(p) {
			return &Error{Key: "image.packages", Msg: fmt.Sprintf("%q is not a Debian package name (lower case letters, digits, '+', '-' and '.', starting with a letter or digit; no version or architecture)", clip(p))}
		}
		if slices.Contains(im.Packages[:i], p) {
			return &Error{Key: "image.packages", Msg: fmt.Sprintf("%q is listed twice", p)}
		}
	}
	if im.Dockerfile != "" {
		if why := relativePathRefusal(im.Dockerfile); why != "" {
			return &Error{Key: "image.dockerfile", Msg: fmt.Sprintf("%q %s", clip(im.Dockerfile), why)}
		}
	}
	return nil
}

// relativePathRefusal says why p is not a path inside the workspace, or
// "" if it is one (as far as the text goes: Load checks the links on the
// way). p is cleaned (cleanSlash).
func relativePathRefusal(p string) string {
	switch {
	case len(p) > 1024:
		return "is longer than 1024 bytes"
	case strings.HasPrefix(p, "/"):
		return "is an absolute path; give a path relative to the workspace's top directory"
	case strings.Contains(p, "\\"):
		return "holds a backslash; separate directories with '/'"
	case p == "..", strings.HasPrefix(p, "../"):
		return "leads out of the workspace; give a path inside it"
	case p == "." || p == "":
		return "names the workspace itself, not a file in it"
	case cleanSlash(p) != p:
		return "is not a clean path"
	}
	return ""
}

// cleanSlash cleans a slash-separated path; "" stays "".
func cleanSlash(p string) string {
	if p == "" {
		return ""
	}
	return path.Clean(p)
}

func (s Setup) validate() error {
	if s.Command == "" {
		if len(s.Allow) > 0 {
			return &Error{Key: "setup.allow", Msg: "rules without setup.command: they open the network while the setup command runs, and there is none"}
		}
		if s.Timeout != 0 {
			return &Error{Key: "setup.timeout", Msg: "a timeout without setup.command: give the command, or remove the timeout"}
		}
		return nil
	}
	if len(s.Command) > MaxValue {
		return &Error{Key: "setup.command", Msg: fmt.Sprintf("%d bytes, more than %d: put a longer setup in a script of the workspace and run that", len(s.Command), MaxValue)}
	}
	if strings.TrimSpace(s.Command) == "" {
		return &Error{Key: "setup.command", Msg: "is only spaces; remove it, or give a command"}
	}
	if strings.ContainsRune(s.Command, 0) {
		return &Error{Key: "setup.command", Msg: "holds a NUL character"}
	}
	if why := valueRefusal(s.Command); why != "" {
		return &Error{Key: "setup.command", Msg: why}
	}
	if s.Timeout <= 0 || s.Timeout > MaxSetupTimeout {
		return &Error{Key: "setup.timeout", Msg: fmt.Sprintf("%s is not between 0 and %s", s.Timeout, MaxSetupTimeout)}
	}
	return validRules("setup.allow", s.Allow)
}

// validRules checks a list of NAME[:PORT] rules with the egress proxy's
// own parser.
func validRules(key string, rules []string) error {
	if len(rules) > MaxRules {
		return &Error{Key: key, Msg: fmt.Sprintf("%d rules, more than %d", len(rules), MaxRules)}
	}
	for _, r := range rules {
		if _, err := egress.ParseRule(r); err != nil {
			return &Error{Key: key, Msg: plain(err)}
		}
	}
	return nil
}

func (e Egress) validate() error {
	if err := validRules("egress.allow", e.Allow); err != nil {
		return err
	}
	if err := validRules("egress.deny", e.Deny); err != nil {
		return err
	}
	switch e.Mode {
	case "":
		if len(e.Allow) > 0 || len(e.Deny) > 0 || e.Ask {
			return &Error{Key: "egress.mode", Msg: fmt.Sprintf("missing: allow, deny and ask need a mode (%s, %s or %s)", session.EgressOffline, session.EgressAnthropic, session.EgressAllowlist)}
		}
		return nil
	case session.EgressOffline:
		if len(e.Allow) > 0 || len(e.Deny) > 0 || e.Ask {
			return &Error{Key: "egress.mode", Msg: fmt.Sprintf("%s reaches nothing, so allow, deny and ask mean nothing with it; use mode = %q", session.EgressOffline, session.EgressAllowlist)}
		}
		return nil
	case session.EgressAnthropic:
		if len(e.Allow) > 0 || e.Ask {
			return &Error{Key: "egress.mode", Msg: fmt.Sprintf("%s allows the API only; for more use mode = %q", session.EgressAnthropic, session.EgressAllowlist)}
		}
	case session.EgressAllowlist:
		if len(e.Allow) == 0 && !e.Ask {
			return &Error{Key: "egress.allow", Msg: fmt.Sprintf("the allowlist is empty: list names (NAME[:PORT]), set ask = true to approve names as the box asks for them, or use mode = %q", session.EgressOffline)}
		}
	default:
		return &Error{Key: "egress.mode", Msg: fmt.Sprintf("%q is not %s, %s or %s", clip(e.Mode), session.EgressOffline, session.EgressAnthropic, session.EgressAllowlist)}
	}
	// The policy the session's start will make, so that the file is
	// refused now for what would stop the start.
	if _, err := (egress.Spec{Posture: e.Mode, Allow: e.Allow, Deny: e.Deny, Ask: e.Ask}).Policy(); err != nil {
		return &Error{Key: "egress", Msg: plain(err)}
	}
	return nil
}

// plain is err's message without the sentinel's own text at its end:
// every *Error is ErrInvalid already.
func plain(err error) string {
	return strings.TrimSuffix(err.Error(), ": "+errdefs.ErrInvalid.Error())
}

// quoteKey writes a TOML key as a dotted key part: bare if it can be,
// quoted otherwise.
func quoteKey(k string) string {
	for _, r := range k {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return fmt.Sprintf("%q", clip(k))
		}
	}
	if k == "" {
		return `""`
	}
	return clip(k)
}
