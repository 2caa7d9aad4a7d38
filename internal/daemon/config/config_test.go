package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestGoodFile(t *testing.T) {
	cfg, err := Load("testdata/good.toml", true)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Log.Format != "json" || cfg.Log.Level != "debug" {
		t.Fatalf("log = %+v", cfg.Log)
	}
	if cfg.Proxy.StreamIdleTimeout.D() != 90*time.Second || cfg.Proxy.MaxRequestBytes != 1<<20 {
		t.Fatalf("proxy = %+v", cfg.Proxy)
	}
	// Keys the file leaves out keep their defaults.
	if cfg.Proxy.ReadHeaderTimeout != Default().Proxy.ReadHeaderTimeout {
		t.Fatalf("default lost: %v", cfg.Proxy.ReadHeaderTimeout)
	}
	u, err := ParseUpstream(cfg.Anthropic.Upstream)
	if err != nil || u.Path != "/prefix" {
		t.Fatalf("upstream %v %v", u, err)
	}
	k := cfg.Kubernetes
	if k.Namespace != "team-a" || k.HomeGB != 20 || k.CPURequest != 0.5 || k.MemoryRequestMB != 512 || k.WorkspaceGB != 0 || k.Runtime != "gvisor" ||
		k.NodeSelector["paddock.dev/boxes"] != "true" || len(k.Tolerations) != 1 || k.Tolerations[0].Effect != "NoSchedule" {
		t.Fatalf("kubernetes = %+v", k)
	}
}

func TestBadFiles(t *testing.T) {
	for _, tc := range []struct {
		file, key, msg string
	}{
		{"unknown_key.toml", "proxy.listn", `did you mean "proxy.listen"`},
		{"unknown_section.toml", "unknown_section", "unknown key"},
		{"bad_type.toml", "proxy.max_request_bytes", "incompatible types"},
		{"http_upstream.toml", "anthropic.upstream", "only to a loopback"},
		{"no_version.toml", "version", "missing"},
		{"bad_duration.toml", "proxy.stream_idle_timeout", "not a duration"},
		{"public_listen.toml", "proxy.listen", "not a loopback"},
		{"broken_syntax.toml", "", "to end table name"},
		{"future_version.toml", "version", "reads version 1"},
		{"bad_format.toml", "log.format", `"xml" is not one of`},
		{"bad_backend.toml", "sessions.backend", `"vm" is not one of local, docker, kubernetes`},
		{"bad_k8s_image.toml", "kubernetes.image", "not pinned by digest"},
		{"bad_k8s_toleration.toml", "kubernetes.tolerations", "toleration 1: operator Exists takes no value"},
		{"bad_k8s_namespace.toml", "kubernetes.namespace", "is not a namespace name"},
		{"bad_k8s_request.toml", "kubernetes.cpu_request", "-1 is outside"},
		{"bad_k8s_key.toml", "kubernetes.namspace", `did you mean "kubernetes.namespace"`},
		{"bad_policy.toml", "egress.policies.npm", "never \"*\" alone"},
		{"bad_relay.toml", "relay[0].prefix", "not shadow the API"},
		{"bad_local_runtime.toml", "local.runtime", "bwrap (bubblewrap) or runsc (gVisor)"},
		{"bad_local_runsc.toml", "local.runsc", "give runsc's absolute path"},
		{"freeze_after_sleep.toml", "sessions.freeze_after", "not shorter than sessions.sleep_after (1h0m0s)"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join("testdata", tc.file)
			_, err := Load(path, true)
			if err == nil {
				t.Fatal("no error")
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %T %v is not *Error", err, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, path) {
				t.Errorf("error %q does not name the file", msg)
			}
			if tc.key != "" && !strings.Contains(msg, tc.key) {
				t.Errorf("error %q does not name key %s", msg, tc.key)
			}
			if !strings.Contains(msg, tc.msg) {
				t.Errorf("error %q does not say %q", msg, tc.msg)
			}
		})
	}
}

func TestMissingFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "none.toml")
	cfg, err := Load(p, false)
	if err != nil || !reflect.DeepEqual(cfg, Default()) {
		t.Fatalf("optional missing file: %v", err)
	}
	if _, err := Load(p, true); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("required missing file: %v", err)
	}
}

func TestDefaultIsValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestParseUpstream(t *testing.T) {
	for in, ok := range map[string]bool{
		"https://api.anthropic.com":         true,
		"https://gw.example.test/anthropic": true,
		"http://127.0.0.1:8080":             true,
		"http://[::1]:8080":                 true,
		"http://localhost:1":                true,
		"http://10.0.0.1":                   false,
		"http://127.0.0.1.nip.io":           false,
		"ftp://api.anthropic.com":           false,
		"https://user:pw@api.anthropic.com": false,
		"https://api.anthropic.com/?x=1":    false,
		"api.anthropic.com":                 false,
		"":                                  false,
		"https://":                          false,
	} {
		_, err := ParseUpstream(in)
		if (err == nil) != ok {
			t.Errorf("ParseUpstream(%q) err=%v, want ok=%v", in, err, ok)
		}
	}
}

func TestParseListen(t *testing.T) {
	for in, ok := range map[string]bool{
		"": true, "off": true, "unix:/run/x.sock": true, "127.0.0.1:0": true, "[::1]:80": true,
		"localhost:7780": true, "0.0.0.0:80": false, ":80": false, "unix:rel.sock": false,
		"10.1.2.3:80": false, "127.0.0.1": false, "127.0.0.1:x": false,
	} {
		_, err := ParseListen(in)
		if (err == nil) != ok {
			t.Errorf("ParseListen(%q) err=%v, want ok=%v", in, err, ok)
		}
	}
}

// FuzzParse: arbitrary bytes give a config that validates, or an *Error; never a panic.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.toml")
	for _, p := range files {
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	f.Add([]byte("version = 1\n[proxy]\nread_timeout = \"-1s\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("fuzz.toml", data)
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %T is not *Error: %v", err, err)
			}
			if ce.File != "fuzz.toml" {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("accepted config does not validate: %v", err)
		}
	})
}

func TestUsersAndAPI(t *testing.T) {
	c, err := Parse("t.toml", []byte("version = 1\n[api]\ngroup = \"paddock\"\n[credential]\nfallback_to_owner = true\n[users]\ntokens_per_day = 1000\nmax_streams = 4\n[users.limits.ann]\nmax_sessions = 2\ntokens_per_day = 50\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.API.Group != "paddock" || !c.Credential.FallbackToOwner {
		t.Fatalf("%+v %+v", c.API, c.Credential)
	}
	if l := c.Users.For("ann"); l.TokensPerDay != 50 || l.MaxSessions != 2 || l.MaxStreams != 4 {
		t.Fatalf("ann: %+v", l)
	}
	if l := c.Users.For("ben"); l.TokensPerDay != 1000 || l.MaxSessions != 0 || l.MaxStreams != 4 {
		t.Fatalf("ben: %+v", l)
	}
	for _, bad := range []string{
		"[api]\ngroup = \"Bad Group\"",
		"[users]\nmax_sessions = -1",
		"[users.limits.\"../x\"]\nmax_sessions = 1",
		"[users.limits.ann]\ntokens_per_day = -5",
		"[users]\nmax_session = 1",
	} {
		if _, err := Parse("t.toml", []byte("version = 1\n"+bad+"\n")); err == nil {
			t.Errorf("accepted: %s", bad)
		}
	}
}

// TestUsageView: anthropic.usage_view is off by default, can be turned on,
// and is never on without the direct path it rides on.
func TestUsageView(t *testing.T) {
	for _, c := range []struct {
		toml string
		want bool
	}{
		{"", false},
		{"[anthropic]\nusage_view = false\n", false},
		{"[anthropic]\nusage_view = true\n", true},
		{"[anthropic]\ndirect = false\n", false},
		{"[anthropic]\ndirect = false\nusage_view = true\n", false},
		{"[anthropic]\ndirect = true\nusage_view = true\n", true},
	} {
		cfg, err := Parse("t.toml", []byte("version = 1\n"+c.toml))
		if err != nil {
			t.Fatalf("%q: %v", c.toml, err)
		}
		if got := cfg.Anthropic.UsageViewOn(); got != c.want {
			t.Errorf("%q: usage view %v, want %v", c.toml, got, c.want)
		}
	}
}

// TestServicesSets: a set of grants is checked at load.
func TestServicesSets(t *testing.T) {
	for doc, ok := range map[string]bool{
		"version = 1\n[services.sets]\nship = [\"gh:o/r:push\", \"tracker\"]\n": true,
		"version = 1\n[services.sets]\nship = [\"gh:o/r:admin\"]\n":             false,
		"version = 1\n[services.sets]\nShip = [\"gh:o/r\"]\n":                   false,
		"version = 1\n[services.sets]\nship = []\n":                             false,
	} {
		_, err := Parse("paddock.toml", []byte(doc))
		if (err == nil) != ok {
			t.Errorf("%q: %v", doc, err)
		}
	}
}

// TestWebListen: the page goes to a network only over TLS.
func TestWebListen(t *testing.T) {
	for _, c := range []struct {
		web Web
		err string
	}{
		{Web{Listen: "127.0.0.1:7777"}, ""},
		{Web{Listen: "off"}, ""},
		{Web{Listen: "0.0.0.0:7777"}, "only over TLS"},
		{Web{Listen: "192.0.2.1:7777"}, "only over TLS"},
		{Web{Listen: "0.0.0.0:7777", TLS: "self-signed", Hosts: []string{"paddock.example.com", "192.0.2.1"}}, ""},
		{Web{Listen: ":7777", Cert: "/etc/c.pem", Key: "/etc/k.pem"}, ""},
		{Web{Listen: "example.com:7777", TLS: "self-signed"}, "not a name"},
		{Web{Listen: "0.0.0.0:7777", TLS: "yes"}, "is not \"self-signed\""},
		{Web{Listen: "0.0.0.0:7777", TLS: "self-signed", Cert: "/c"}, "not both"},
		{Web{Listen: "0.0.0.0:7777", Cert: "/c"}, "go together"},
		{Web{Listen: "0.0.0.0:7777", Cert: "c.pem", Key: "k.pem"}, "absolute"},
		{Web{Listen: "127.0.0.1:7777", Hosts: []string{"https://x"}}, "not a host name"},
		{Web{Listen: "127.0.0.1"}, "not a host:port"},
	} {
		err := c.web.validate()
		if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%+v: %v, want %q", c.web, err, c.err)
		}
	}
}
