package e2e

import (
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/proxy/credproxy/attacks"
	"github.com/paddockhq/paddock/internal/testkit/fakeapi"
)

// boxRaw is run in the box with an attack on stdin: it opens one TCP
// connection to the box's API address, writes stdin to it from a
// background copy (a non-interactive shell gives background jobs
// /dev/null for stdin unless told otherwise, hence fd 4), and prints
// whatever comes back until the server closes the connection.
const boxRaw = `exec 4<&0; exec 3<>/dev/tcp/127.0.0.1/4141 || exit 1; ` +
	`cat <&4 >&3 2>/dev/null & w=$!; timeout 10 cat <&3; kill $w 2>/dev/null; true`

// TestAttackSuiteFromTheBox sends the proxy's attack suite from inside a
// real box of each backend, through the guest's API listener and the
// channel, with the session's own token — the path an attacker in the box
// has. For every case the upstream (the fake API) sees exactly as many
// requests as the case allows, and every request it does see is one of the
// three routes carrying the owner's credential once, in its header, and
// neither the box's token nor the junk credential the attack smuggles.
func TestAttackSuiteFromTheBox(t *testing.T) {
	e := newEnv(t)
	for _, backend := range []string{"local", "docker"} {
		t.Run(backend, func(t *testing.T) {
			e.t = t
			name := "atk-" + backend
			_, tok := e.chat(name, backend)
			if !strings.HasPrefix(tok, "pdk_st_") {
				t.Fatalf("token %q", tok)
			}
			// Claude Code's own requests (a turn's follow-ups) are told
			// apart by its User-Agent; the attacks send none.
			for _, tc := range attacks.Cases("Authorization", "Bearer "+tok, "X-Api-Key", "") {
				t.Run(tc.Name, func(t *testing.T) {
					before := len(e.fake.Requests())
					out := e.execStdin(name, tc.Req+attacks.Sentinel, "bash", "-c", boxRaw)
					resps := attacks.ReadResponses(strings.NewReader(out))
					var seen []fakeapi.Request
					for _, r := range e.fake.Requests()[before:] {
						if !strings.HasPrefix(r.Header.Get("User-Agent"), "claude-cli/") {
							seen = append(seen, r)
						}
					}
					var codes []int
					for _, r := range resps {
						codes = append(codes, r.StatusCode)
					}
					if len(seen) != tc.Want {
						t.Errorf("upstream saw %d requests, want %d (responses %v)", len(seen), tc.Want, codes)
					}
					// The upstream's answers (the fake API validates bodies,
					// so a forwarded "{}" is its 400) reach the box; the
					// proxy's own refusals are the rest.
					fromUpstream := 0
					for _, r := range resps {
						if strings.HasPrefix(r.Header.Get("Request-Id"), "req_fake_") {
							fromUpstream++
						}
					}
					if fromUpstream != tc.Want {
						t.Errorf("%d answers from upstream, want %d (responses %v; raw %.300q)", fromUpstream, tc.Want, codes, out)
					}
					for _, r := range seen {
						checkSeen(t, r, tok)
					}
				})
			}
			e.pd("rm", "-f", name)
		})
	}
}

// checkSeen holds one request the upstream saw to the proxy's promise.
func checkSeen(t *testing.T, r fakeapi.Request, tok string) {
	t.Helper()
	switch r.Method + " " + r.Path {
	case "POST /v1/messages", "POST /v1/messages/count_tokens", "GET /v1/models":
	default:
		t.Errorf("upstream saw %s %s", r.Method, r.Path)
	}
	if r.CredentialHeader != "authorization" || r.Credential != ownerToken || len(r.Header.Values("Authorization")) != 1 {
		t.Errorf("upstream credential: %s, %d Authorization values; want the owner's, once", r.CredentialHeader, len(r.Header.Values("Authorization")))
	}
	for name, vs := range r.Header {
		for _, v := range vs {
			for _, bad := range []string{tok, attacks.Junk, "evil.test", "10.0.0.1"} {
				if strings.Contains(v, bad) {
					t.Errorf("upstream saw %q in %s", bad, name)
				}
			}
			if strings.Contains(v, ownerToken) && name != "Authorization" {
				t.Errorf("owner's credential in %s", name)
			}
		}
		if n := strings.ToLower(name); strings.HasPrefix(n, "x-forwarded") || strings.Contains(n, "method") || n == "x-api-key" {
			t.Errorf("upstream saw header %s", name)
		}
	}
}
