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

// TestUsageView: with anthropic.usage_view, /status shows the plan's usage
// limits in a box. The box runs without the CLI's quiet switch (telemetry stays off), so the CLI
// asks the API host for its usage; the Runner forwards that one request,
// with the owner's credential, and refuses everything else the CLI now
// tries there (bootstrap, its profile, artifacts, …): none of those reach
// the upstream, and the refusals are in the decision log.
func TestUsageView(t *testing.T) {
	e := newEnvOpts(t, envOpts{tlsUpstream: true, plan: "max", scopes: "user:inference user:profile", usageView: true})
	e.fake.API = map[string]string{
		"/api/oauth/usage": `{"five_hour":{"utilization":37.0,"resets_at":"2026-12-02T01:00:00Z"},"seven_day":{"utilization":61.0,"resets_at":"2026-12-05T00:00:00Z"},"seven_day_opus":null,"extra_usage":{"is_enabled":false,"monthly_limit":null,"used_credits":null,"utilization":null}}`,
		// Served, but never to reach the upstream: the Runner refuses it.
		"/api/oauth/profile": `{"account":{"uuid":"00000000-0000-4000-8000-000000000001","email":"owner@example.test"},"organization":{"uuid":"00000000-0000-4000-8000-000000000002","organization_type":"claude_max"}}`,
	}
	name := "usage"
	e.pd("run", "-d", "--name", name, "--backend", "local")
	e.waitScreen(name, promptReady, 60*time.Second)
	e.typeLine(name, "/status")
	e.waitScreen(name, "Status", 30*time.Second)
	var s string
	for i := 0; i < 4 && !strings.Contains(s, "37% used"); i++ {
		e.pd("exec", name, "--", "tmux", "-L", "paddock", "send-keys", "-t", "claude", "Tab")
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) && !strings.Contains(s, "37% used") {
			s = e.screen(name)
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !strings.Contains(s, "37% used") || !strings.Contains(s, "61% used") {
		t.Fatalf("/status never showed the plan's usage:\n%s\n%s", s, e.pd("logs", name))
	}
	usage := false
	for _, r := range e.fake.Requests() {
		if !strings.HasPrefix(r.Path, "/api/") {
			continue
		}
		if r.Path != "/api/oauth/usage" {
			t.Errorf("an off-list path reached the upstream: %s %s", r.Method, r.Path)
		}
		if r.Credential != ownerToken {
			t.Errorf("%s %s went upstream with another credential than the owner's", r.Method, r.Path)
		}
		usage = true
	}
	if !usage {
		t.Fatal("the usage request never reached the upstream")
	}
	logs := e.pd("logs", name)
	if !strings.Contains(logs, "/api/oauth/usage") || !strings.Contains(logs, "/api/oauth/profile") {
		t.Fatalf("the decision log lacks the direct requests (the forwarded one and the refused one):\n%s", logs)
	}
	e.pd("rm", "-f", name)
}
