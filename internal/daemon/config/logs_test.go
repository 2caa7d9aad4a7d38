package config

import (
	"strings"
	"testing"
	"time"
)

func TestLogsKeys(t *testing.T) {
	if d := Default().Logs; d.MaxSize != DefaultLogsMaxSize || d.MaxAge != 0 {
		t.Fatalf("defaults: %+v", d)
	}
	for _, c := range []struct {
		toml    string
		size    ByteSize
		age     time.Duration
		problem string
	}{
		{"[logs]\nmax_size = \"64MiB\"\nmax_age = \"720h\"", 64 << 20, 720 * time.Hour, ""},
		{"[logs]\nmax_size = 1000000", 1000000, 0, ""},
		{"[logs]\nmax_size = \"2 GB\"", 2e9, 0, ""},
		{"[logs]\nmax_size = 0", 0, 0, ""},
		{"[logs]\nmax_size = \"100\"", 0, 0, "logs.max_size: 100 bytes is below the least cap"},
		{"[logs]\nmax_size = \"lots\"", 0, 0, `"lots" is not a size`},
		{"[logs]\nmax_size = -5", 0, 0, `"-5" is not a size`},
		{"[logs]\nmax_size = \"9999999999GiB\"", 0, 0, "is not a size"},
		{"[logs]\nmax_age = \"10s\"", 0, 0, "logs.max_age: 10s: use 1m or more"},
		{"[logs]\nmax_age = \"-1h\"", 0, 0, "logs.max_age"},
		{"[logs]\nmax_count = 3", 0, 0, "logs.max_count: unknown key"},
	} {
		cfg, err := Parse("t.toml", []byte("version = 1\n"+c.toml))
		if c.problem != "" {
			if err == nil || !strings.Contains(err.Error(), c.problem) {
				t.Errorf("%q: %v, want %q", c.toml, err, c.problem)
			}
			continue
		}
		if err != nil || cfg.Logs.MaxSize != c.size || cfg.Logs.MaxAge.D() != c.age {
			t.Errorf("%q: %v %+v", c.toml, err, cfg.Logs)
		}
	}
}
