package api

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestRoutesListed: every route this package registers is in Routes (so
// in the OpenAPI document, with a scope), and every one of Routes is
// registered: read from the sources, where each route is a string literal
// given to HandleFunc or to sessionRoutes' one.
func TestRoutesListed(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?:HandleFunc|\bone)\("([A-Z]+ /v1/[^"]*)"`)
	registered := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			registered[m[1]] = true
		}
	}
	listed := map[string]bool{}
	for _, r := range Routes {
		if listed[r.Pattern] {
			t.Errorf("%s is listed twice", r.Pattern)
		}
		listed[r.Pattern] = true
		if r.Summary == "" {
			t.Errorf("%s has no summary", r.Pattern)
		}
	}
	var missing, extra []string
	for p := range registered {
		if !listed[p] {
			missing = append(missing, p)
		}
	}
	for p := range listed {
		if !registered[p] {
			extra = append(extra, p)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 || len(extra) > 0 || len(registered) < 40 {
		t.Fatalf("served but not in Routes: %v\nin Routes but not served: %v (%d served)", missing, extra, len(registered))
	}
}

// TestOpenAPIDocument: the document is OpenAPI 3.1 JSON with every route
// under its path and method, a scope and a unique operationId each, and
// every $ref resolving to a component.
func TestOpenAPIDocument(t *testing.T) {
	var doc struct {
		OpenAPI    string                               `json:"openapi"`
		Paths      map[string]map[string]map[string]any `json:"paths"`
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	raw := OpenAPI()
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	ids := map[string]string{}
	examples := 0
	for _, r := range Routes {
		op := doc.Paths[r.Path()][strings.ToLower(r.Method())]
		if op == nil {
			t.Fatalf("%s is not in the document", r.Pattern)
		}
		id, _ := op["operationId"].(string)
		if prev, dup := ids[id]; dup || id == "" {
			t.Fatalf("operationId %q of %s is also %s's", id, r.Pattern, prev)
		}
		ids[id] = r.Pattern
		if sc, _ := op["x-paddock-scope"].(string); sc != scopeName(r.Scope) || sc == "" {
			t.Fatalf("%s: scope %q", r.Pattern, sc)
		}
		// An example is a body of the route's type, field for field, and
		// is in the document as the request's example.
		if r.Example != nil {
			if r.Request == nil {
				t.Fatalf("%s has an example and no request body", r.Pattern)
			}
			dec := json.NewDecoder(bytes.NewReader(r.Example))
			dec.DisallowUnknownFields()
			if err := dec.Decode(reflect.New(reflect.TypeOf(r.Request)).Interface()); err != nil {
				t.Fatalf("%s: its example is no %T: %v", r.Pattern, r.Request, err)
			}
			ex, _ := json.Marshal(op["requestBody"].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["example"])
			if !jsonEqual(ex, r.Example) {
				t.Fatalf("%s: the document's example is %s", r.Pattern, ex)
			}
			examples++
		}
	}
	if examples < 4 {
		t.Fatalf("%d examples: create, message, set and approve each have one", examples)
	}
	for _, m := range regexp.MustCompile(`"\$ref": "#/components/schemas/([^"]+)"`).FindAllStringSubmatch(string(raw), -1) {
		if doc.Components.Schemas[m[1]] == nil {
			t.Fatalf("$ref to a missing schema %s", m[1])
		}
	}
	// The session, as programs read it: its name, state and activity.
	sess, _ := json.Marshal(doc.Components.Schemas["Session"])
	for _, f := range []string{`"name"`, `"observed"`, `"activity"`} {
		if !strings.Contains(string(sess), f) {
			t.Fatalf("the Session schema has no %s: %s", f, sess)
		}
	}
}

// TestScopes: read < drive < operate; no token reaches a socket-only
// route; an unknown scope is refused.
func TestScopes(t *testing.T) {
	for _, c := range []struct {
		have, need Scope
		ok         bool
	}{
		{ScopeRead, ScopeRead, true}, {ScopeRead, ScopeDrive, false}, {ScopeRead, ScopeOperate, false},
		{ScopeDrive, ScopeRead, true}, {ScopeDrive, ScopeDrive, true}, {ScopeDrive, ScopeOperate, false},
		{ScopeOperate, ScopeOperate, true}, {ScopeOperate, ScopeSocket, false}, {"admin", ScopeRead, false},
	} {
		if got := c.have.Allows(c.need); got != c.ok {
			t.Errorf("%q allows %q: %v", c.have, c.need, got)
		}
	}
	if _, err := ParseScope("admin"); err == nil {
		t.Fatal("scope admin accepted")
	}
	for _, p := range []string{"POST /v1/sessions/{ref}/exec", "POST /v1/sessions/{ref}/attach", "POST /v1/tokens", "PUT /v1/credential", "PUT /v1/secrets/{name}", "POST /v1/web/login"} {
		if s, ok := ScopeOf(p); !ok || s != ScopeSocket {
			t.Errorf("%s: scope %q", p, s)
		}
	}
	if s, _ := ScopeOf("POST /v1/sessions/{ref}/message"); s != ScopeDrive {
		t.Errorf("message: %q", s)
	}
	if _, ok := ScopeOf("/"); ok {
		t.Error("the catch-all has a scope")
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}
