package image

import (
	"encoding/json"
	"strings"
	"testing"

	mobyimage "github.com/moby/moby/api/types/image"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

func TestParseDockerfile(t *testing.T) {
	src := "# syntax=docker/dockerfile:1\n# escape=`\n\n# a comment\nARG PADDOCK_BASE\nfrom ${PADDOCK_BASE} as build\nRUN a `\n  # a comment inside\n  && b\nCOPY\tx /y\n"
	got := parseDockerfile([]byte(src))
	want := []instruction{
		{"ARG", "PADDOCK_BASE", 5},
		{"FROM", "${PADDOCK_BASE} as build", 6},
		{"RUN", "a && b", 7},
		{"COPY", "x /y", 10},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("instruction %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	// Without the directive, a backtick is just a character and a
	// backslash continues.
	got = parseDockerfile([]byte("FROM x\nRUN a \\\n b `\nRUN c\n"))
	if len(got) != 3 || got[1].args != "a b `" {
		t.Fatalf("got %+v", got)
	}
}

// TestCheckDockerfile: the forms the contract accepts, and each refusal
// with the words that say what to write instead.
func TestCheckDockerfile(t *testing.T) {
	digest := "@sha256:" + strings.Repeat("ab", 32)
	head := "ARG PADDOCK_BASE\nFROM ${PADDOCK_BASE}\n"
	for name, src := range map[string]string{
		"braces":                 head + "RUN apt-get --version\n",
		"no braces, AS":          "ARG PADDOCK_BASE\nFROM $PADDOCK_BASE AS dev\nRUN true\n",
		"ARG with a default":     "ARG PADDOCK_BASE=unused\nFROM ${PADDOCK_BASE}\n",
		"platform flag":          "ARG PADDOCK_BASE\nFROM --platform=linux/amd64 ${PADDOCK_BASE}\n",
		"lower case":             "arg PADDOCK_BASE\nfrom ${PADDOCK_BASE} as Build\nfrom build\n",
		"stage chain":            head[:len(head)-1] + " AS a\nFROM a AS b\nFROM b\nCOPY --from=a /x /y\n",
		"first FROM is the base": head + "FROM golang:1.22" + digest + " AS go\nFROM ${PADDOCK_BASE}\nCOPY --from=go /a /b\nCOPY --from=1 /c /d\n",
		"pinned copy --from":     head + "COPY --from=busybox" + digest + " /bin/busybox /usr/local/bin/\n",
		"scratch stage":          head + "FROM scratch AS files\nCOPY a /a\nFROM ${PADDOCK_BASE}\nCOPY --from=files /a /a\n",
		"continued FROM":         "ARG PADDOCK_BASE\nFROM \\\n  ${PADDOCK_BASE}\n",
		"comments, directives":   "# escape=\\\n# hello\nARG PADDOCK_BASE\n\n# more\nFROM ${PADDOCK_BASE}\n",
		"ADD of a local file":    head + "ADD tools.tar.gz /opt/\n",
		"JSON COPY":              head + `COPY ["a b", "/c/"]` + "\n",
		"copy with chown":        head + "COPY --chown=1000:1000 --from=0 /a /b\n",
	} {
		if err := CheckDockerfile([]byte(src), NetworkNone); err != nil {
			t.Errorf("%s: refused: %v", name, err)
		}
	}
	if err := CheckDockerfile([]byte(head+"ADD https://example.com/x.tgz /opt/\n"), NetworkDefault); err != nil {
		t.Errorf("ADD of a URL with a network: %v", err)
	}
	for name, c := range map[string]struct{ src, want string }{
		"empty":             {"", "no FROM: start with ARG PADDOCK_BASE then FROM ${PADDOCK_BASE}"},
		"a tag":             {"FROM debian:bookworm\n", "the first FROM must be FROM ${PADDOCK_BASE}"},
		"a digest first":    {"ARG PADDOCK_BASE\nFROM golang" + digest + " AS go\nFROM ${PADDOCK_BASE}\n", "the first FROM must be FROM ${PADDOCK_BASE}"},
		"no ARG":            {"FROM ${PADDOCK_BASE}\n", "write ARG PADDOCK_BASE then FROM ${PADDOCK_BASE}"},
		"ARG after FROM":    {"FROM ${PADDOCK_BASE}\nARG PADDOCK_BASE\n", "is not declared"},
		"other variable":    {"ARG PADDOCK_BASE\nARG B\nFROM ${B}\n", "the first FROM must be FROM ${PADDOCK_BASE}"},
		"default syntax":    {"ARG PADDOCK_BASE\nFROM ${PADDOCK_BASE:-debian}\n", "the first FROM must be"},
		"later tag":         {head + "FROM golang:1.22 AS go\n", `"golang:1.22" is neither a stage of this file nor an image pinned by digest: a tag floats; write FROM golang@sha256:<digest>`},
		"later latest":      {head + "FROM alpine\n", "write FROM alpine@sha256:<digest>"},
		"later variable":    {head + "ARG X\nFROM $X\n", "FROM may use no build argument but ${PADDOCK_BASE}"},
		"unknown stage":     {head + "FROM nope\n", "is neither a stage of this file"},
		"later stage":       {"ARG PADDOCK_BASE\nFROM ${PADDOCK_BASE} AS a\nCOPY --from=b /x /y\nFROM ${PADDOCK_BASE} AS b\n", "--from=b is neither a stage"},
		"copy from a tag":   {head + "COPY --from=golang:1.22 /usr/local/go /usr/local/go\n", "--from=golang:1.22 is neither a stage of this file nor an image pinned by digest: a tag floats; write --from=golang@sha256:<digest>"},
		"copy from index":   {head + "COPY --from=1 /a /b\n", "--from=1 is not an earlier stage"},
		"last not on base":  {head + "FROM golang" + digest + "\nRUN true\n", "the last stage is not built on ${PADDOCK_BASE}"},
		"last from scratch": {head + "FROM scratch\n", "the last stage is not built on ${PADDOCK_BASE}"},
		"too many words":    {"ARG PADDOCK_BASE\nFROM ${PADDOCK_BASE} AS a b\n", "write FROM IMAGE or FROM IMAGE AS NAME"},
		"bad stage name":    {"ARG PADDOCK_BASE\nFROM ${PADDOCK_BASE} AS 1x\n", "is not a name"},
		"before FROM":       {"ARG PADDOCK_BASE\nRUN true\nFROM ${PADDOCK_BASE}\n", "an instruction before the first FROM"},
		"VOLUME":            {head + "VOLUME /data\n", "VOLUME would give every box an anonymous Docker volume"},
		"HEALTHCHECK":       {head + "HEALTHCHECK CMD true\n", "HEALTHCHECK would run its command in every box"},
		"STOPSIGNAL":        {head + "STOPSIGNAL SIGKILL\n", "STOPSIGNAL would change how paddock stops a box"},
		"ONBUILD":           {head + "ONBUILD RUN true\n", "ONBUILD would run its step inside paddock's own part"},
		"ADD URL offline":   {head + "ADD https://example.com/x.tgz /opt/\n", "ADD of https://example.com/x.tgz fetches it from the network through the Docker daemon"},
		"ADD JSON URL":      {head + `ADD ["http://example.com/x", "/x"]` + "\n", "build with --build-network default"},
		"ADD git":           {head + "ADD git@github.com:a/b.git /src\n", "fetches it from the network"},
		"bad JSON":          {head + `COPY ["a", ` + "\n", "not a JSON array"},
		"line number":       {head + "\n\nFROM nope\n", "line 5: FROM nope"},
	} {
		err := CheckDockerfile([]byte(c.src), NetworkNone)
		if !errdefs.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v\nwant it to say %q", name, err, c.want)
		}
	}
}

// FuzzCheckDockerfile: whatever a project's Dockerfile holds, the check
// answers (nil or an error) and never panics.
func FuzzCheckDockerfile(f *testing.F) {
	f.Add("ARG PADDOCK_BASE\nFROM ${PADDOCK_BASE} AS a\nCOPY --from=a /x /y\n")
	f.Add("# escape=`\nFROM x `\n y\n")
	f.Add(`ADD ["http://x", "/y"]`)
	f.Add("FROM\nCOPY --from=\nFROM AS\n\\")
	f.Fuzz(func(t *testing.T, s string) {
		_ = CheckDockerfile([]byte(s), NetworkNone)
	})
}

// TestCheckProjectStage: what a project's stage may not leave in its
// image settings, however its Dockerfile made them.
func TestCheckProjectStage(t *testing.T) {
	// The settings as the daemon sends them; "%s" is where a case adds
	// its own.
	stage := func(extra string) mobyimage.InspectResponse {
		t.Helper()
		var ins mobyimage.InspectResponse
		js := `{"Config":{"User":"nobody","Env":["GOPATH=/go"],"Labels":{"` + LabelBaseRecipe + `":"abc","org.example.team":"tools"` + extra + `}}`
		if err := json.Unmarshal([]byte(js), &ins); err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return ins
	}
	for name, extra := range map[string]string{
		"a plain stage":    `}`,
		"HEALTHCHECK NONE": `},"Healthcheck":{"Test":["NONE"]}`,
	} {
		if err := checkProjectStage(stage(extra)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, c := range map[string]struct{ extra, want string }{
		"paddock label": {`,"paddock.unsafe-host-code":"1"}`, "sets the label paddock.unsafe-host-code"},
		"volume":        {`},"Volumes":{"/data":{}}`, "declares volumes (/data)"},
		"health check":  {`},"Healthcheck":{"Test":["CMD","true"]}`, "remove the HEALTHCHECK"},
		"stop signal":   {`},"StopSignal":"SIGKILL"`, "remove the STOPSIGNAL"},
		"onbuild":       {`},"OnBuild":["RUN true"]`, "ONBUILD triggers"},
	} {
		if err := checkProjectStage(stage(c.extra)); !errdefs.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}
