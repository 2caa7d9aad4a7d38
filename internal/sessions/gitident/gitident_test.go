package gitident

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestRender(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   Identity
		want string // the [user] lines; "" for an error
	}{
		{"both", Identity{"Ada Lovelace", "ada@example.org"}, "\tname = \"Ada Lovelace\"\n\temail = \"ada@example.org\"\n"},
		{"email only", Identity{Email: "a@b"}, "\temail = \"a@b\"\n"},
		{"quotes and backslashes", Identity{Name: `A "B" \C`}, "\tname = \"A \\\"B\\\" \\\\C\"\n"},
		{"comment characters stay in the value", Identity{Name: "x # y ; z"}, "\tname = \"x # y ; z\"\n"},
		{"unicode", Identity{Name: "Zoë Ł"}, "\tname = \"Zoë Ł\"\n"},
		{"newline", Identity{Name: "a\n[core]\n\tpager = evil"}, ""},
		{"carriage return", Identity{Email: "a\r@b"}, ""},
		{"tab", Identity{Name: "a\tb"}, ""},
		{"NUL", Identity{Name: "a\x00"}, ""},
		{"DEL", Identity{Name: "a\x7f"}, ""},
		{"not UTF-8", Identity{Name: "\xff"}, ""},
		{"too long", Identity{Name: string(make([]byte, MaxField+1))}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.id.Render()
			if tc.want == "" {
				if err == nil {
					t.Fatalf("rendered %q", got)
				}
				return
			}
			want := "# Written by paddock from the git identity of the person who ran `paddock run`.\n[user]\n" + tc.want
			if err != nil || string(got) != want {
				t.Fatalf("got %q, %v\nwant %q", got, err, want)
			}
		})
	}
}

// TestRenderReadByGit: what Render writes, git reads back as it was.
func TestRenderReadByGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	home := t.TempDir()
	id := Identity{Name: `Ada "the" \ Lovelace # ; x`, Email: "ada@example.org"}
	b, err := id.Render()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Read(context.Background(), home, []string{"PATH=/usr/bin:/bin"})
	if err != nil || got != id {
		t.Fatalf("read back %+v, %v", got, err)
	}
	// Nothing set: the zero identity, no error.
	if got, err := Read(context.Background(), t.TempDir(), nil); err != nil || !got.IsZero() {
		t.Fatalf("empty home: %+v, %v", got, err)
	}
}
