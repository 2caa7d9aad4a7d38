package image

import (
	"strings"
	"testing"
)

func TestCheckBase(t *testing.T) {
	hex := strings.Repeat("ab", 32)
	for in, ok := range map[string]bool{
		"sha256:" + hex:                       true,
		"debian@sha256:" + hex:                true,
		"localhost:5000/debian@sha256:" + hex: true,
		"debian:bookworm":                     false,
		"debian":                              false,
		"debian:latest":                       false,
		"debian:bookworm@sha256:" + hex[:10]:  false,
		"sha256:" + hex[:63]:                  false,
		"":                                    false,
		"sha256:" + strings.ToUpper(hex):      false,
	} {
		if err := CheckBase(in); (err == nil) != ok {
			t.Errorf("CheckBase(%q) = %v, want ok=%v", in, err, ok)
		}
	}
}

func TestDockerfile(t *testing.T) {
	base := "sha256:" + strings.Repeat("0f", 32)
	df, err := Dockerfile(Spec{Base: base, ClaudeVersion: "2.1.328"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"FROM " + base + "\n", "COPY claude /usr/local/bin/claude", "DISABLE_AUTOUPDATER=1",
		"USER 1000:1000", `ENTRYPOINT ["/usr/local/bin/paddock", "guest"]`, `paddock.claude-version="2.1.328"`,
	} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q:\n%s", want, df)
		}
	}
	if strings.Contains(df, "latest") || strings.Contains(df, "apt-get") || strings.Contains(df, "curl") {
		t.Errorf("Dockerfile floats or fetches:\n%s", df)
	}
	for _, v := range []string{"latest", "^2.1.0", "2.1", "2.1.x", ""} {
		if _, err := Dockerfile(Spec{Base: base, ClaudeVersion: v}); err == nil {
			t.Errorf("version %q accepted", v)
		}
	}
	if _, err := Dockerfile(Spec{Base: "debian:bookworm", ClaudeVersion: "2.1.328"}); err == nil {
		t.Error("tag base accepted")
	}
}
