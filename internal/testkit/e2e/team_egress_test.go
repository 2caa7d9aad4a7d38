package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/daemon/audit"
)

// TestTeamEgressAlways: on a team server, approving for always is the
// session owner's (and admins') alone. An operator of one shared ask-mode
// session is refused --always, saying who may and what he may do instead
// (approve for the session, which works); the owner's --always lands on
// her standing list, which she (and root) list with egress always ls and
// the operator may neither list nor change; egress always rm takes it off
// her running sessions at once; the audit log has the refused approval
// and the removal, with whose list it was.
func TestTeamEgressAlways(t *testing.T) {
	const group = "pdkegress"
	users := makeUsers(t, group, map[string]bool{"pdk-ann": true, "pdk-ben": true})
	ann, ben := users["pdk-ann"], users["pdk-ben"]
	e := newEnv(t, "[api]", `group = "`+group+`"`)
	const annTok = "sk-ant-oat01-fake-ann-token-e2e-egress-00"
	e.fake.Credentials = append(e.fake.Credentials, annTok)
	e.asOK(ann, annTok+"\n", "credential", "set")
	for _, name := range []string{"ann-a", "ann-b"} {
		e.asOK(ann, "", "run", "-d", "--name", name, "--backend", "local", "--egress", "allowlist", "--ask")
	}
	e.asOK(ann, "", "share", "ann-a", "pdk-ben", "--role", "operator")

	// The operator: not for always; for the session, yes.
	e.asRefused(ben, "only the session's owner (pdk-ann) or an admin can approve for always", "egress", "approve", "ann-a", "docs.example.com", "--always")
	e.asRefused(ben, "approve for this session without --always", "egress", "approve", "ann-a", "docs.example.com", "--always")
	if out := e.asOK(ben, "", "egress", "approve", "ann-a", "docs.example.com"); !strings.Contains(out, "for the session's life") {
		t.Fatalf("an operator approving for the session: %s", out)
	}
	if out := e.asOK(ben, "", "egress", "always", "ls"); !strings.Contains(out, "pdk-ben has no standing egress approvals") {
		t.Fatalf("ben's own standing list: %s", out)
	}

	// The owner: for always, on her list, which only she and admins see.
	if out := e.asOK(ann, "", "egress", "approve", "ann-a", "*.example.org", "--always"); !strings.Contains(out, "always, in every ask-mode session of its owner") {
		t.Fatalf("the owner approving for always: %s", out)
	}
	if out := e.asOK(ann, "", "egress", "always", "ls"); !strings.Contains(out, "*.example.org:443") || !strings.Contains(out, "pdk-ann") {
		t.Fatalf("ann's standing list: %s", out)
	}
	if out := e.pd("egress", "always", "ls", "--user", "pdk-ann"); !strings.Contains(out, "*.example.org:443") {
		t.Fatalf("root listing ann's standing list: %s", out)
	}
	e.asRefused(ben, "theirs and the admins' alone", "egress", "always", "ls", "--user", "pdk-ann")
	e.asRefused(ben, "theirs and the admins' alone", "egress", "always", "rm", "*.example.org", "--user", "pdk-ann")

	// Removed: from both her running sessions at once.
	if out := e.asOK(ann, "", "egress", "always", "rm", "*.example.org"); !strings.Contains(out, "removed *.example.org:443 from the standing approvals of pdk-ann: 2 running session(s)") {
		t.Fatalf("ann removing her standing approval: %s", out)
	}
	if out := e.asOK(ann, "", "egress", "always", "ls"); !strings.Contains(out, "pdk-ann has no standing egress approvals") {
		t.Fatalf("ann's standing list after rm: %s", out)
	}
	e.asRefused(ann, "paddock egress always ls lists them", "egress", "always", "rm", "*.example.org")
	if logs := e.pd("logs", "--egress", "ann-b"); !strings.Contains(logs, "standing approval *.example.org:443 of pdk-ann removed") {
		t.Fatalf("ann-b's egress log: %s", logs)
	}

	var refused, removed bool
	for _, l := range strings.Split(strings.TrimSpace(e.pd("audit", "--json")), "\n") {
		var a audit.Entry
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatalf("audit line: %v: %s", err, l)
		}
		refused = refused || a.Action == audit.ActionEgressApprove && a.User == "pdk-ben" && strings.Contains(a.Error, "only the session's owner")
		removed = removed || a.Action == "egress-always-rm" && a.User == "pdk-ann" && a.Target == "pdk-ann" && strings.HasPrefix(a.Detail, "*.example.org:443 sessions=2") && a.Error == ""
	}
	if !refused || !removed {
		t.Fatalf("the audit log: refused %v, removed %v\n%s", refused, removed, e.pd("audit"))
	}
}
