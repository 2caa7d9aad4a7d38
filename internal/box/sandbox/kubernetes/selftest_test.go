package kubernetes

import (
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

func TestAPIServerAddrs(t *testing.T) {
	for host, want := range map[string]string{
		"https://127.0.0.1:6443":  "", // the pod's own loopback: not the API server
		"https://10.1.2.3:6443":   "10.1.2.3:6443",
		"https://10.1.2.3":        "10.1.2.3:443",
		"https://[fd00::1]:6443":  "[fd00::1]:6443",
		"https://api.example.com": "", // a name: the box has no resolver anyway
		"https://localhost:6443":  "",
		"::not a url::":           "",
	} {
		b := &Backend{rest: &rest.Config{Host: host}}
		if got := strings.Join(b.apiServerAddrs(), ","); got != want {
			t.Errorf("%s: %q, want %q", host, got, want)
		}
	}
}
