package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestDirectFeatures: fast mode works in a box (no status request needed);
// with the real Claude Code in a box (offline posture),
// what it asks the API host itself for reaches the Runner's TLS path: a
// Team plan's remote managed settings are answered by the (TLS) upstream
// with the owner's credential, and their company announcement then shows
// in the box's terminal. What it sends there off the allowlist (its
// profile request, with the user:profile scope) is refused and logged,
// and never reaches the upstream.
func TestDirectFeatures(t *testing.T) {
	e := newEnvOpts(t, envOpts{tlsUpstream: true, plan: "team", scopes: "user:inference user:profile"})
	const announcement = "PADDOCK-MANAGED-4412"
	e.fake.API = map[string]string{
		// The shape the CLI reads: {uuid, checksum, settings}.
		"/api/claude_code/settings":      `{"uuid":"00000000-0000-4000-8000-00000000aaaa","checksum":"e2e-1","settings":{"companyAnnouncements":["` + announcement + `"]}}`,
		"/api/claude_code/policy_limits": `{"restrictions":{}}`,
		"/api/oauth/profile":             `{"account":{"uuid":"00000000-0000-4000-8000-000000000001","email":"owner@example.test","display_name":"Owner"},"organization":{"uuid":"00000000-0000-4000-8000-000000000002","organization_type":"claude_team","rate_limit_tier":"default_claude_max_5x"}}`,
	}
	name := "direct"
	e.pd("run", "-d", "--name", name, "--backend", "local")
	e.waitScreen(name, promptReady, 60*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	got := map[string]bool{}
	for time.Now().Before(deadline) && !(got["/api/claude_code/settings"] && got["/api/claude_code/policy_limits"]) {
		for _, r := range e.fake.Requests() {
			if strings.HasPrefix(r.Path, "/api/") {
				if r.Credential != ownerToken {
					t.Fatalf("%s %s went upstream with another credential than the owner's", r.Method, r.Path)
				}
				got[r.Path] = true
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !got["/api/claude_code/settings"] || !got["/api/claude_code/policy_limits"] || got["/api/oauth/profile"] {
		t.Fatalf("the direct requests that reached the upstream: %v", got)
	}
	// Only allowlisted paths ever reach it.
	for _, r := range e.fake.Requests() {
		if strings.HasPrefix(r.Path, "/api/") && r.Path != "/api/claude_code/settings" && r.Path != "/api/claude_code/policy_limits" {
			t.Fatalf("an off-list path reached the upstream: %s %s", r.Method, r.Path)
		}
	}
	logs := e.pd("logs", name)
	if !strings.Contains(logs, "/api/claude_code/settings") || !strings.Contains(logs, "/api/oauth/profile") {
		t.Fatalf("the decision log lacks the direct requests (the forwarded one and the refused one):\n%s", logs)
	}
	// Fast mode: on at once, without a status request; the next turn asks
	// the API for it.
	e.typeLine(name, "/fast on")
	e.waitScreen(name, "Fast mode ON", 30*time.Second)
	e.fake.Reset()
	e.typeLine(name, "say hi")
	e.waitScreen(name, "hi from the fake server", 60*time.Second)
	fast := false
	for _, r := range e.fake.Requests() {
		fast = fast || r.Path == "/v1/messages" && strings.Contains(string(r.Body), `"speed":"fast"`)
	}
	if !fast {
		t.Fatal(`no request with "speed":"fast" after /fast on`)
	}
	// The managed settings took effect in the box: the announcement.
	e.pd("rm", "-f", name)
	e.pd("run", "-d", "--name", name+"2", "--backend", "local")
	e.waitScreen(name+"2", announcement, 60*time.Second)
	e.pd("rm", "-f", name+"2")
}
