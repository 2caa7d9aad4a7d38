package web

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestCreateWithPrompt: the page's "first task" field (a textarea named
// prompt) reaches the create request as its Prompt.
func TestCreateWithPrompt(t *testing.T) {
	srv, fb := setup(t)
	c := loggedIn(t, srv)
	req, _ := http.NewRequest("POST", srv.URL+"/api/sessions", strings.NewReader(`{"name":"x","prompt":"fix the tests\nthen stop"}`))
	req.Header.Set("X-Paddock", "1")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || len(fb.created) != 1 || fb.created[0].Prompt != "fix the tests\nthen stop" {
		t.Fatalf("POST: %d %+v", resp.StatusCode, fb.created)
	}
	page, _ := c.Get(srv.URL + "/")
	b, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if !strings.Contains(string(b), `<textarea name="prompt"`) {
		t.Fatal("the new-session form has no prompt textarea")
	}
}
