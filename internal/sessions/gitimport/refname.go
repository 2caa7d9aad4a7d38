package gitimport

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// Namespace is where the branches of every session land in the host
// repository: Namespace + <session> + "/" + <branch>.
const Namespace = "refs/remotes/paddock/"

// MaxBranch bounds a branch name taken from a bundle, in bytes.
const MaxBranch = 200

// MaxBranches bounds the branches one import takes; the rest are refused.
const MaxBranches = 64

// validSession is a session's name as session.ValidName has it; checkSession
// adds what a ref's component may not be.
var validSession = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// checkSession says whether s can name a session's part of Namespace.
func checkSession(s string) error {
	if !validSession.MatchString(s) || strings.Contains(s, "..") || strings.HasSuffix(s, ".") || strings.HasSuffix(s, ".lock") {
		return fmt.Errorf("session %s cannot name refs: use lowercase letters, digits, '-', '_' and '.', at most 63, "+
			"starting with a letter or digit, with no '..' and no trailing '.' or '.lock': %w", strconv.Quote(s), errdefs.ErrInvalid)
	}
	return nil
}

// whyNotBranch says why name, a ref's name as a bundle gives it, is not a
// branch Import takes, or "" if it is. Git's own rules for a branch (git
// check-ref-format --branch) are the floor; on top, only letters, digits
// and "_-./+" pass, and no part of the name may start with '.' or '-' or
// end with '.' or ".lock": nothing that reads as an option, a path out, a
// revision expression (@{, ^, ~, :), a glob or a lock file, nor anything
// a terminal would act on.
func whyNotBranch(name string) string {
	branch, ok := strings.CutPrefix(name, "refs/heads/")
	switch {
	case name == "HEAD":
		return "HEAD is not a branch: paddock takes branches (refs/heads/...) only"
	case strings.HasPrefix(name, "refs/tags/"):
		return "a tag: paddock takes branches (refs/heads/...) only"
	case !ok:
		return "not a branch (refs/heads/...): paddock takes branches only"
	case branch == "":
		return "an empty branch name"
	case len(branch) > MaxBranch:
		return fmt.Sprintf("a branch name longer than %d bytes", MaxBranch)
	case branch == "HEAD":
		return "a branch named HEAD"
	}
	for _, c := range []byte(branch) {
		switch {
		case c < 0x20 || c == 0x7f:
			return "a control character in the name"
		case c == '\\':
			return "a backslash in the name"
		case c >= 0x80:
			return "a byte outside ASCII in the name"
		case !branchByte(c):
			return fmt.Sprintf("%q in the name: paddock takes letters, digits and _ - . / + only", c)
		}
	}
	if strings.Contains(branch, "..") {
		return `".." in the name`
	}
	for part := range strings.SplitSeq(branch, "/") {
		switch {
		case part == "":
			return `an empty part (a leading, trailing or doubled "/")`
		case part[0] == '.':
			return `a part that starts with "."`
		case part[0] == '-':
			return `a part that starts with "-"`
		case strings.HasSuffix(part, "."):
			return `a part that ends with "."`
		case strings.HasSuffix(part, ".lock"):
			return `a part that ends with ".lock"`
		}
	}
	return ""
}

func branchByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_-./+", c) >= 0
}
