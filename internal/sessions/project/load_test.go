package project

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// workspace makes a workspace with files (path → contents; a value
// starting with "->" makes a symbolic link to the rest).
func workspace(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(c, "->"); ok {
			if err := os.Symlink(target, full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoad(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "Dockerfile"), []byte("FROM scratch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "p.toml"), []byte("model = \"opus\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	withDockerfile := "[image]\ndockerfile = \"tools/paddock.Dockerfile\"\n"
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string // "" to load, "nil" for no file, else in the error
	}{
		{"no file", map[string]string{"README": "x"}, "nil"},
		{"a file", map[string]string{FileName: "model = \"opus\"\n"}, ""},
		{"an empty file", map[string]string{FileName: ""}, ""},
		{"a bad file", map[string]string{FileName: "model = 1\n"}, "model: the value is an integer; this key takes a string"},
		{"a link to a file outside", map[string]string{FileName: "->" + filepath.Join(outside, "p.toml")}, ".paddock.toml: is a symbolic link; paddock reads a project file only as a regular file"},
		{"a link to a file inside", map[string]string{FileName: "->other.toml", "other.toml": "model = \"opus\"\n"}, "is a symbolic link"},
		{"a dangling link", map[string]string{FileName: "->nowhere"}, "is a symbolic link"},
		{"a directory", map[string]string{FileName + "/x": "y"}, ".paddock.toml: is not a regular file (d"},
		{"too big", map[string]string{FileName: strings.Repeat("#", MaxSize+1)}, "65537 bytes, more than the 65536"},
		{"a dockerfile", map[string]string{FileName: withDockerfile, "tools/paddock.Dockerfile": "FROM x\n"}, ""},
		{"a dockerfile through a link inside", map[string]string{FileName: withDockerfile, "tools": "->build", "build/paddock.Dockerfile": "FROM x\n"}, ""},
		{"a dockerfile that is a link inside", map[string]string{FileName: withDockerfile, "tools/paddock.Dockerfile": "->../Dockerfile", "Dockerfile": "FROM x\n"}, ""},
		{"a dockerfile missing", map[string]string{FileName: withDockerfile}, `image.dockerfile: "tools/paddock.Dockerfile" does not exist in the workspace`},
		{"a dockerfile that is a directory", map[string]string{FileName: withDockerfile, "tools/paddock.Dockerfile/x": "y"}, "is not a regular file"},
		{"a dockerfile linked out (absolute)", map[string]string{FileName: withDockerfile, "tools/paddock.Dockerfile": "->" + filepath.Join(outside, "Dockerfile")},
			`image.dockerfile: "tools/paddock.Dockerfile" leads out of the workspace through a symbolic link`},
		{"a dockerfile linked out (relative)", map[string]string{FileName: withDockerfile, "tools/paddock.Dockerfile": "->../../" + filepath.Base(outside) + "/Dockerfile"},
			"leads out of the workspace through a symbolic link"},
		{"a directory on the way linked out", map[string]string{FileName: withDockerfile, "tools": "->" + outside, filepath.Join("x", "y"): "z"},
			"leads out of the workspace through a symbolic link"},
		{"a dockerfile linked out to nothing", map[string]string{FileName: withDockerfile, "tools/paddock.Dockerfile": "->/nonexistent/Dockerfile"},
			"leads out of the workspace through a symbolic link"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := workspace(t, tc.files)
			if tc.name == "a dockerfile linked out (relative)" {
				// ws/tools/x → ../../<outside>: only right when ws and
				// outside are siblings; make it so.
				link := filepath.Join(ws, "tools", "paddock.Dockerfile")
				rel, err := filepath.Rel(filepath.Join(ws, "tools"), filepath.Join(outside, "Dockerfile"))
				if err != nil {
					t.Fatal(err)
				}
				_ = os.Remove(link)
				if err := os.Symlink(rel, link); err != nil {
					t.Fatal(err)
				}
			}
			if tc.name == "a directory on the way linked out" {
				if err := os.WriteFile(filepath.Join(outside, "paddock.Dockerfile"), []byte("FROM x\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			f, err := Load(ws)
			switch tc.want {
			case "nil":
				if f != nil || err != nil {
					t.Fatalf("got %v, %v; want nil, nil", f, err)
				}
			case "":
				if err != nil || f == nil {
					t.Fatalf("got %v, %v", f, err)
				}
				raw, _ := os.ReadFile(filepath.Join(ws, FileName))
				if string(f.Raw) != string(raw) || f.Sum != Sum(f.Accepted()) {
					t.Fatal("Raw or Sum is not the file's")
				}
				// The Dockerfile is read with the file, and accepted
				// with it.
				if f.Image.Dockerfile == "" {
					if f.DockerfileText != nil || f.Sum != Sum(raw) {
						t.Fatalf("no Dockerfile, yet %q is accepted", f.Accepted())
					}
				} else {
					want := string(raw) + "# ---- tools/paddock.Dockerfile, image.dockerfile (" + strconv.Itoa(len(raw)) + " bytes of .paddock.toml above, 7 bytes of it below) ----\nFROM x\n"
					if string(f.DockerfileText) != "FROM x\n" || string(f.Accepted()) != want {
						t.Fatalf("accepted %q, want %q", f.Accepted(), want)
					}
				}
			default:
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got %v\nwant %q in it", err, tc.want)
				}
				if !errors.Is(err, errdefs.ErrInvalid) {
					t.Fatalf("not ErrInvalid: %v", err)
				}
			}
		})
	}
}

// TestLoadFIFO: a FIFO at the file's name is refused at once, not waited on.
func TestLoadFIFO(t *testing.T) {
	ws := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(ws, FileName), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	_, err := Load(ws)
	if err == nil || !strings.Contains(err.Error(), "is not a regular file") {
		t.Fatalf("got %v", err)
	}
}

// TestLoadNoWorkspace: a workspace that does not exist, or is a file, is
// an error, not "no project file".
func TestLoadNoWorkspace(t *testing.T) {
	dir := t.TempDir()
	if f, err := Load(filepath.Join(dir, "gone")); err == nil || f != nil {
		t.Errorf("missing workspace: %v, %v", f, err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if f, err := Load(file); err == nil || f != nil {
		t.Errorf("a file as workspace: %v, %v", f, err)
	}
}

// TestLoadPlaceholder: the empty directory a running box's workspace has in
// the place of a missing project file is no file; a directory with
// something in it is refused.
func TestLoadPlaceholder(t *testing.T) {
	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, FileName), 0o755); err != nil {
		t.Fatal(err)
	}
	if f, err := Load(ws); f != nil || err != nil {
		t.Fatalf("the placeholder: %v, %v", f, err)
	}
	if err := os.WriteFile(filepath.Join(ws, FileName, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ws); err == nil || !strings.Contains(err.Error(), "is not a regular file") {
		t.Fatalf("a directory with a file in it: %v", err)
	}
}
