package kubernetes

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// roleFile is contrib/kubernetes/role.yaml, found from this file.
func roleFile(t testing.TB) string {
	t.Helper()
	_, me, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(me), "..", "..", "..", "..", "contrib", "kubernetes", "role.yaml")
}

// shippedRole parses the Role paddock ships, strictly: an unknown field is
// a mistake in it.
func shippedRole(t testing.TB) *rbacv1.Role {
	t.Helper()
	b, err := os.ReadFile(roleFile(t))
	if err != nil {
		t.Fatal(err)
	}
	var r rbacv1.Role
	if err := yaml.UnmarshalStrict(b, &r); err != nil {
		t.Fatalf("role.yaml: %v", err)
	}
	return &r
}

// TestRoleGrantsWhatTheBackendCalls: the shipped Role grants every call the
// backend makes and nothing more: no wildcard, no name restriction, no
// other resource or verb.
func TestRoleGrantsWhatTheBackendCalls(t *testing.T) {
	r := shippedRole(t)
	if r.Kind != "Role" || r.APIVersion != "rbac.authorization.k8s.io/v1" || r.Namespace != "" {
		t.Fatalf("not a namespaced Role without a namespace of its own: %s %s %q", r.APIVersion, r.Kind, r.Namespace)
	}
	granted := map[apiCall]bool{}
	for _, rule := range r.Rules {
		if len(rule.ResourceNames) != 0 || len(rule.NonResourceURLs) != 0 {
			t.Errorf("rule %+v: names or URLs", rule)
		}
		for _, g := range rule.APIGroups {
			for _, res := range rule.Resources {
				for _, v := range rule.Verbs {
					if g == "*" || res == "*" || v == "*" {
						t.Errorf("rule %+v: a wildcard", rule)
					}
					c := apiCall{g, res, v}
					if granted[c] {
						t.Errorf("%v granted twice", c)
					}
					granted[c] = true
				}
			}
		}
	}
	for _, c := range apiCalls {
		if !granted[c] {
			t.Errorf("the Role does not grant %+v, which the backend calls", c)
		}
		delete(granted, c)
	}
	for c := range granted {
		t.Errorf("the Role grants %+v, which the backend never calls", c)
	}
}
