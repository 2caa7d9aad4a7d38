package gql

import (
	"errors"
	"strings"
	"testing"
)

// TestParse: the shapes a client sends read back as their operations,
// fields, arguments and fragments; malformed ones are errors.
func TestParse(t *testing.T) {
	d, err := Parse(`# a comment
query Q($owner: String!, $n: [Int!]! = [1, 2]) @dir(a: 1) {
  r: repository(owner: $owner, name: "a\"b\u00e9") {
    ...F
    ... on Repository @skip(if: false) { id }
    issues(first: 10, orderBy: {field: CREATED_AT, direction: DESC}, states: [OPEN]) { nodes { title } }
  }
}
fragment F on Repository { name, owner { login } }
mutation { createPullRequest(input: {repositoryId: "R", draft: true, n: -1.5e3, x: null}) { pullRequest { url } } }
{ viewer { login } }`)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Operations) != 3 || d.Operations[0].Name != "Q" || d.Operations[1].Type != "mutation" || d.Operations[2].Type != "query" {
		t.Fatalf("operations %+v", d.Operations)
	}
	top := d.Operations[0].Selection[0]
	if top.Name != "repository" || top.Alias != "r" || top.Args["owner"].Var != "owner" || top.Args["name"].Scalar != "a\"b\u00e9" {
		t.Fatalf("top %+v", top)
	}
	var names []string
	if err := d.Walk(top.Selection, func(s *Selection, depth int) error {
		names = append(names, s.Name)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names, ","); got != "name,owner,login,id,issues,nodes,title" {
		t.Fatalf("walk %s", got)
	}
	in := d.Operations[1].Selection[0].Args["input"].Resolve(nil).(map[string]any)
	if in["repositoryId"] != "R" || in["draft"] != true || in["n"] != -1500.0 || in["x"] != nil {
		t.Fatalf("input %v", in)
	}
	for _, bad := range []string{"", "{", "{ }", "query { a(: 1) }", "{ a(x: 1, x: 2) }", "{ a(x: $) }", `{ a(x: "open) }`, "{ a(x: 01a) }",
		"fragment F on X { a } fragment F on X { b } { a }", "{ a } }", "mutation M(a: Int) { a }", "{ a(x: [1) }", "subscription", `{ a(x: "\q") }`,
		strings.Repeat("{ a ", 100) + strings.Repeat("}", 100)} {
		if _, err := Parse(bad); !errors.Is(err, ErrSyntax) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	d, _ = Parse(`{ a { ...F } } fragment F on X { b { ...F } }`)
	if err := d.Walk(d.Operations[0].Selection, func(*Selection, int) error { return nil }); err != nil {
		t.Fatalf("a cycle of fragments: %v", err)
	}
	d, _ = Parse(`{ a { ...G } }`)
	if err := d.Walk(d.Operations[0].Selection, func(*Selection, int) error { return nil }); !errors.Is(err, ErrSyntax) {
		t.Fatalf("an undefined fragment: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(`query Q($a: [Int!] = [1]) { r: repository(owner: $a, name: "x") { ...F ... on X { id } } } fragment F on R { n }`)
	f.Add(`{ a(b: {c: [1, 2.5e3, "s", """block""", true, null, E]}) @d { e } }`)
	f.Fuzz(func(t *testing.T, src string) {
		d, err := Parse(src)
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("an error not marked syntax: %v", err)
			}
			return
		}
		for _, o := range d.Operations {
			_ = d.Walk(o.Selection, func(s *Selection, depth int) error {
				for _, v := range s.Args {
					v.Resolve(map[string]any{"a": 1})
				}
				return nil
			})
		}
	})
}
