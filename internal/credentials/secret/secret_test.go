package secret

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

const canary = "sk-canary-value-that-must-not-print"

func TestValueNeverPrints(t *testing.T) {
	v := New(canary)
	type wrapper struct {
		Cred  Value
		Inner *Value
	}
	w := wrapper{Cred: v, Inner: &v}
	var outs []string
	for _, verb := range []string{"%s", "%v", "%+v", "%#v", "%q", "%x", "%X", "%d", "%10s", "%-20v"} {
		outs = append(outs, fmt.Sprintf(verb, v), fmt.Sprintf(verb, w), fmt.Sprintf(verb, &v))
	}
	outs = append(outs, fmt.Sprint(v), fmt.Sprintln(v, w), v.String(), v.GoString())
	j, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	outs = append(outs, string(j))
	m, err := json.Marshal(map[string]any{"v": v})
	if err != nil {
		t.Fatal(err)
	}
	outs = append(outs, string(m))
	for _, h := range []slog.Handler{
		slog.NewTextHandler(&bytes.Buffer{}, nil), slog.NewJSONHandler(&bytes.Buffer{}, nil),
	} {
		_ = h
	}
	var tb, jb bytes.Buffer
	slog.New(slog.NewTextHandler(&tb, nil)).Info("x", "cred", v, "w", w, slog.Any("p", &v))
	slog.New(slog.NewJSONHandler(&jb, nil)).Info("x", "cred", v, "w", w, slog.Any("p", &v))
	outs = append(outs, tb.String(), jb.String())
	for _, o := range outs {
		if strings.Contains(o, canary) || strings.Contains(o, fmt.Sprintf("%x", canary)) {
			t.Fatalf("secret leaked in %q", o)
		}
		if !strings.Contains(o, Redacted) {
			t.Fatalf("output %q does not say %s", o, Redacted)
		}
	}
	if v.Reveal() != canary {
		t.Fatal("Reveal does not return the secret")
	}
}

func TestNewToken(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		tok, err := NewToken()
		if err != nil {
			t.Fatal(err)
		}
		s := tok.Reveal()
		if !strings.HasPrefix(s, TokenPrefix) || len(s) != len(TokenPrefix)+43 {
			t.Fatalf("bad token shape %d", len(s))
		}
		if seen[s] {
			t.Fatal("duplicate token")
		}
		seen[s] = true
	}
}

func TestEqualAndHash(t *testing.T) {
	a, b := New("abc"), New("abc")
	if !a.Equal(b) || a.Equal(New("abd")) || a.Equal(New("ab")) {
		t.Fatal("Equal is wrong")
	}
	if !HashOf(a).Equal(HashOf(b)) || HashOf(a).Equal(HashOf(New("x"))) {
		t.Fatal("hash equality is wrong")
	}
	if strings.Contains(HashOf(a).String(), "abc") {
		t.Fatal("hash string shows secret")
	}
}
