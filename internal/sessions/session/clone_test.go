package session

import "testing"

func TestCloneUnsaved(t *testing.T) {
	for _, c := range []struct {
		name string
		c    *Clone
		want bool
	}{
		{"no clone", nil, false},
		{"never seen", &Clone{Branch: "b"}, false},
		{"nothing beyond its base", &Clone{Head: "h", Ahead: 0}, false},
		{"commits neither fetched nor merged", &Clone{Head: "h2", Ahead: 2, Fetched: "h1"}, true},
		{"fetched", &Clone{Head: "h2", Ahead: 2, Fetched: "h2"}, false},
		{"merged", &Clone{Head: "h2", Ahead: 2, Merged: "h2"}, false},
		{"fetched, then changed and not committed", &Clone{Head: "h2", Ahead: 2, Fetched: "h2", Dirty: true}, true},
		{"only changes not committed", &Clone{Head: "h", Dirty: true}, true},
	} {
		if got := c.c.Unsaved(); got != c.want {
			t.Errorf("%s: Unsaved() = %v, want %v", c.name, got, c.want)
		}
	}
}
