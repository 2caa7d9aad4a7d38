package gitimport

import (
	"os/exec"
	"strings"
	"testing"
)

// branchCases: a ref name as a bundle gives it, and a word of why it is
// refused ("" if taken).
var branchCases = []struct{ name, why string }{
	{"refs/heads/main", ""},
	{"refs/heads/paddock/x", ""},
	{"refs/heads/feature/a_b-c.d+e", ""},
	{"refs/heads/v1.2", ""},
	{"refs/heads/a.b/c", ""},
	{"refs/heads/" + strings.Repeat("a", MaxBranch), ""},

	{"HEAD", "HEAD is not a branch"},
	{"refs/tags/v1", "a tag"},
	{"refs/remotes/origin/main", "not a branch"},
	{"refs/heads", "not a branch"},
	{"../../x", "not a branch"},
	{"refs/heads/../../x", `".."`},
	{"refs/heads/", "empty branch"},
	{"refs/heads/HEAD", "named HEAD"},
	{"refs/heads/" + strings.Repeat("a", MaxBranch+1), "longer than"},
	{"refs/heads/-evil", `starts with "-"`},
	{"refs/heads/x/-evil", `starts with "-"`},
	{"refs/heads/.hidden", `starts with "."`},
	{"refs/heads/x/.hidden", `starts with "."`},
	{"refs/heads/x.lock", `".lock"`},
	{"refs/heads/x.lock/y", `".lock"`},
	{"refs/heads/x.", `ends with "."`},
	{"refs/heads/x./y", `ends with "."`},
	{"refs/heads/a..b", `".."`},
	{"refs/heads/a//b", "empty part"},
	{"refs/heads/a/", "empty part"},
	{"refs/heads/a@{1}", `'@'`},
	{"refs/heads/@", `'@'`},
	{"refs/heads/a\x1bb", "control character"},
	{"refs/heads/a\rb", "control character"},
	{"refs/heads/a\x00b", "control character"},
	{"refs/heads/a\x7fb", "control character"},
	{"refs/heads/a\\b", "backslash"},
	{"refs/heads/a b", "' '"},
	{"refs/heads/a~1", "'~'"},
	{"refs/heads/a^", "'^'"},
	{"refs/heads/a:b", "':'"},
	{"refs/heads/a?b", "'?'"},
	{"refs/heads/a*", "'*'"},
	{"refs/heads/a[b", "'['"},
	{"refs/heads/ünï", "outside ASCII"},
	{"refs/heads/a\u202eb", "outside ASCII"}, // right-to-left override
}

func TestWhyNotBranch(t *testing.T) {
	for _, tc := range branchCases {
		got := whyNotBranch(tc.name)
		if tc.why == "" && got != "" || tc.why != "" && !strings.Contains(got, tc.why) {
			t.Errorf("whyNotBranch(%q) = %q, want %q", tc.name, got, tc.why)
		}
	}
}

// TestBranchRulesWithinGits: every branch taken is one git takes (git
// check-ref-format --branch), and so is its ref in the host repository.
func TestBranchRulesWithinGits(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	for _, tc := range branchCases {
		branch, ok := strings.CutPrefix(tc.name, "refs/heads/")
		if !ok || strings.ContainsRune(branch, 0) {
			continue // argv cannot hold a NUL
		}
		err := exec.Command(git, "check-ref-format", "--branch", branch).Run()
		if tc.why == "" && err != nil {
			t.Errorf("paddock takes %q, git check-ref-format --branch does not", branch)
		}
		if tc.why == "" {
			if err := exec.Command(git, "check-ref-format", Namespace+"s1/"+branch).Run(); err != nil {
				t.Errorf("git check-ref-format refuses %q", Namespace+"s1/"+branch)
			}
		}
	}
}

func TestCheckSession(t *testing.T) {
	for s, ok := range map[string]bool{
		"s1": true, "my-session": true, "a_b.c": true, "0": true, strings.Repeat("a", 63): true,
		"": false, "-x": false, ".x": false, "_x": false, "A": false, "a/b": false, "a..b": false, "a.": false,
		"a.lock": false, "a b": false, "a\n": false, strings.Repeat("a", 64): false, "a@{1}": false,
	} {
		if err := checkSession(s); (err == nil) != ok {
			t.Errorf("checkSession(%q) = %v, want ok %v", s, err, ok)
		}
	}
}
