package oauth

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// killEnv makes the test binary a refresher (TestMain): it refreshes the
// login in its store again and again until killed, as the Runner would.
const killEnv = "PADDOCK_OAUTH_KILL_HELPER"

func TestMain(m *testing.M) {
	if v := os.Getenv(killEnv); v != "" {
		os.Exit(refresher(v))
	}
	os.Exit(m.Run())
}

func refresher(arg string) int {
	var a struct{ Store, TokenURL, ClientID string }
	if err := json.Unmarshal([]byte(arg), &a); err != nil {
		return 2
	}
	au := &Authority{Store: Store{Path: a.Store}, Client: &Client{Endpoints: Endpoints{TokenURL: a.TokenURL, ClientID: a.ClientID}}}
	fmt.Println("ready")
	for {
		cur, err := au.Current()
		if err != nil {
			fmt.Println("error:", err)
			return 3
		}
		if err := au.RefreshNow(context.Background(), cur.Secret); err != nil {
			fmt.Println("error:", err)
			return 4
		}
	}
}

// TestRefreshRacingKill9: a refresher killed with SIGKILL at random
// moments, mid-refresh or mid-save, leaves a whole login stored every
// time: the old or the new, one the server issued, never neither.
func TestRefreshRacingKill9(t *testing.T) {
	fs, e := server(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "login.json")
	c := &Client{Endpoints: e}
	rounds, refreshed := 25, 0
	for i := range rounds {
		if err := (Store{Path: path}).Save(login(t, fs, c)); err != nil {
			t.Fatal(err)
		}
		before := fs.Refreshes()
		arg, _ := json.Marshal(map[string]string{"Store": path, "TokenURL": e.TokenURL, "ClientID": e.ClientID})
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), killEnv+"="+string(arg))
		out := &readyWriter{ready: make(chan struct{})}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The kill's moment counts from the refresher saying it is ready, not
		// from its start: a test binary built with -race on a loaded
		// machine can take longer to start than the whole window.
		select {
		case <-out.ready:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("round %d: the refresher did not start: %s", i, out)
		}
		time.Sleep(time.Duration(5+rand.IntN(60)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		if strings.Contains(out.String(), "error:") {
			t.Fatalf("round %d: the refresher failed before the kill: %s", i, out)
		}
		refreshed += fs.Refreshes() - before
		tok, err := (Store{Path: path}).Load()
		if err != nil {
			t.Fatalf("round %d: after kill -9 the stored login is unreadable: %v", i, err)
		}
		if known, _ := fs.Validate(tok.Access.Reveal()); !known {
			t.Fatalf("round %d: the stored access token is not one the server issued", i)
		}
		left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".login.json.tmp*"))
		for _, l := range left {
			os.Remove(l) // a temporary file a kill left; never read
		}
	}
	if refreshed < rounds {
		t.Fatalf("only %d refreshes in %d rounds: the kills did not race refreshes", refreshed, rounds)
	}
	t.Logf("%d rounds, %d refreshes raced by kill -9", rounds, refreshed)
}

// readyWriter keeps what a refresher writes and closes ready once it has
// said "ready".
type readyWriter struct {
	mu    sync.Mutex
	b     strings.Builder
	ready chan struct{}
	said  bool
}

func (w *readyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if !w.said && strings.Contains(w.b.String(), "ready\n") {
		w.said = true
		close(w.ready)
	}
	return len(p), nil
}

func (w *readyWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
