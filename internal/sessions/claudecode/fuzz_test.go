package claudecode

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzSeedClaudeJSON: whatever the box wrote in .claude.json, seeding never
// fails or panics; the result is a JSON object with the seeds; kept says
// whether the input was a JSON object (or blank), as encoding/json's
// validator judges it; and when it was, every other key keeps its value exactly, numbers
// digit for digit, as do the other workspaces under "projects" and the
// other keys of this one.
func FuzzSeedClaudeJSON(f *testing.F) {
	for _, s := range []string{
		"", "{}", "null", "[]", "{broken", `{"a":1} x`, " \n",
		`{"numStartups": 3, "projects": {"/workspace": {"allowedTools": ["x"]}, "/other": {"a": 1}}}`,
		`{"projects": 5, "big": 12345678901234567891, "f": 1.50e3}`,
		`{"projects": {"/workspace": "x"}, "customApiKeyResponses": {"approved": ["old"]}}`,
		`{"a": "\xff"}`, "\u00a0",
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	const key = "pdk_st_0123456789abcdefghijklmnopqrstuvwxyz"
	f.Fuzz(func(t *testing.T, in []byte, withKey bool) {
		approved := ""
		if withKey {
			approved = key
		}
		out, kept, err := SeedClaudeJSON(in, "/workspace", approved)
		if err != nil {
			t.Fatalf("seeding failed: %v", err)
		}
		got := decodeExact(t, out)
		if got["hasCompletedOnboarding"] != true {
			t.Fatalf("onboarding not seeded: %s", out)
		}
		projects, _ := got["projects"].(map[string]any)
		ws, _ := projects["/workspace"].(map[string]any)
		if ws["hasTrustDialogAccepted"] != true {
			t.Fatalf("workspace not trusted: %s", out)
		}
		if withKey {
			ap := got["customApiKeyResponses"].(map[string]any)["approved"]
			if !reflect.DeepEqual(ap, []any{ApprovalSuffix(key)}) {
				t.Fatalf("approval %v", ap)
			}
		}
		want := isObject(in)
		if kept != want {
			t.Fatalf("kept %v for %q; encoding/json says object: %v", kept, in, want)
		}
		if !kept || len(bytes.Trim(in, " \t\r\n")) == 0 {
			return
		}
		prev := decodeExact(t, in)
		for k, v := range prev {
			switch k {
			case "hasCompletedOnboarding":
			case "customApiKeyResponses":
				if !withKey && !reflect.DeepEqual(got[k], v) {
					t.Fatalf("%s changed", k)
				}
			case "projects":
				pp, ok := v.(map[string]any)
				if !ok {
					continue // not an object: replaced
				}
				for w, pv := range pp {
					if w == "/workspace" {
						pw, ok := pv.(map[string]any)
						if !ok {
							continue
						}
						for wk, wv := range pw {
							if wk != "hasTrustDialogAccepted" && !reflect.DeepEqual(ws[wk], wv) {
								t.Fatalf("projects[/workspace].%s changed", wk)
							}
						}
						continue
					}
					if !reflect.DeepEqual(projects[w], pv) {
						t.Fatalf("projects[%q] changed", w)
					}
				}
			default:
				if !reflect.DeepEqual(got[k], v) {
					t.Fatalf("%q changed: %v -> %v", k, v, got[k])
				}
			}
		}
	})
}

// FuzzSeedSettings: as FuzzSeedClaudeJSON, for settings.json.
func FuzzSeedSettings(f *testing.F) {
	for _, s := range []string{"", "{}", "null", `{"env": {"A": "1"}, "n": 1e400}`, `{"skipDangerousModePermissionPrompt": false}`, "[1]"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, kept, err := SeedSettings(in)
		if err != nil {
			t.Fatalf("seeding failed: %v", err)
		}
		got := decodeExact(t, out)
		if got["skipDangerousModePermissionPrompt"] != true {
			t.Fatalf("not seeded: %s", out)
		}
		if kept != isObject(in) {
			t.Fatalf("kept %v for %q", kept, in)
		}
		if !kept || len(bytes.Trim(in, " \t\r\n")) == 0 {
			return
		}
		for k, v := range decodeExact(t, in) {
			if k != "skipDangerousModePermissionPrompt" && !reflect.DeepEqual(got[k], v) {
				t.Fatalf("%q changed", k)
			}
		}
	})
}

// isObject is encoding/json's judgement, by its validator (which converts
// no number, so 1e400 is fine): blank, or one valid JSON text that is an
// object.
func isObject(b []byte) bool {
	t := bytes.Trim(b, " \t\r\n")
	return len(t) == 0 || json.Valid(t) && t[0] == '{'
}

// decodeExact decodes a JSON object with its numbers as written.
func decodeExact(t *testing.T, b []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		t.Fatalf("not a JSON object: %v: %q", err, b)
	}
	return m
}
