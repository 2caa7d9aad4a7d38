package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/daemon/people"
)

// TestIdentifyIgnoresClaims: the caller is the kernel's word on the
// connection (SO_PEERCRED), whatever the request says; a caller who may
// not use the Runner gets 403 with the reason, and no handler runs.
func TestIdentifyIgnoresClaims(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	refuse := false
	who := func(uid uint32) (people.Person, error) {
		if refuse {
			return people.Person{}, fmt.Errorf("uid %d is not in group %q: %w", uid, "team", errdefs.ErrForbidden)
		}
		return people.Person{UID: uid, Name: fmt.Sprintf("u%d", uid)}, nil
	}
	ran := 0
	h := Identify(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran++
		p, _ := people.From(r.Context())
		writeJSON(w, 200, p)
	}), who)
	srv := &http.Server{Handler: h, ConnContext: ConnContext}
	go srv.Serve(ln)
	defer srv.Close()
	c := NewClient(sock)
	req, _ := http.NewRequest("GET", "http://paddock/v1/whoami?uid=0&user=root", strings.NewReader(`{"uid":0,"name":"root"}`))
	for _, h := range []string{"X-Remote-User", "X-Paddock-User", "X-Forwarded-User", "Remote-User"} {
		req.Header.Set(h, "root")
	}
	req.SetBasicAuth("root", "x")
	var p people.Person
	if err := c.roundTrip(req, &p); err != nil {
		t.Fatal(err)
	}
	if p.UID != uint32(os.Getuid()) {
		t.Fatalf("the API believed the request: %+v", p)
	}
	refuse = true
	var out json.RawMessage
	err = c.get(context.Background(), "/v1/whoami", &out)
	if !errors.Is(err, errdefs.ErrForbidden) || !strings.Contains(err.Error(), `not in group "team"`) || ran != 1 {
		t.Fatalf("a refused caller: %v (handler ran %d times)", err, ran)
	}
}
