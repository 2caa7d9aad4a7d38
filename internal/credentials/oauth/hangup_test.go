package oauth

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/testkit/fakeoauth"
)

// waitFor polls cond for up to 10 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestRefreshSurvivesTheBoxHangingUp: the box whose request met an
// expired token hangs up (or its turn is interrupted) after the OAuth
// server rotated the refresh token and before it answered. The refresh
// goes on without the box, on a context of its own: the new tokens are
// stored, the next request gets them, and the login is not signed out
// (before, the refresh was cancelled with the box's request, the answer
// lost, and the retry with the dead refresh token got invalid_grant).
func TestRefreshSurvivesTheBoxHangingUp(t *testing.T) {
	fs, e := server(t)
	a, path := newAuthority(t, fs, e)
	old, err := a.Current()
	if err != nil {
		t.Fatal(err)
	}
	oldStored, err := (Store{Path: path}).Load()
	if err != nil {
		t.Fatal(err)
	}
	before := fs.Refreshes()
	const hold = 500 * time.Millisecond
	fs.InjectFault(fakeoauth.FaultLateAnswer, 1, 0, hold)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.RefreshNow(ctx, old.Secret) }()
	waitFor(t, "the server to rotate the refresh token", func() bool { return fs.Refreshes() > before })
	hungUp := time.Now()
	cancel() // the box hangs up
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("RefreshNow of a box that hung up before the answer reports success")
		}
		if d := time.Since(hungUp); d >= hold {
			t.Fatalf("the box that hung up was kept waiting %v, until the answer", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RefreshNow did not return after the box hung up")
	}

	// The next request meets the same expired token: it gets the tokens
	// the server rotated to, with no second refresh and no invalid_grant.
	if err := a.RefreshNow(context.Background(), old.Secret); err != nil {
		t.Fatalf("the next request after the box hung up: %v", err)
	}
	cur, err := a.Current()
	if err != nil {
		t.Fatalf("the login after the box hung up: %v", err)
	}
	if cur.Secret.Equal(old.Secret) {
		t.Fatal("the access token did not change")
	}
	if known, expired := fs.Validate(cur.Secret.Reveal()); !known || expired {
		t.Fatalf("the server does not know the token in use (known %v, expired %v)", known, expired)
	}
	if n := fs.Refreshes() - before; n != 1 {
		t.Fatalf("%d refreshes granted, want 1", n)
	}
	stored, err := (Store{Path: path}).Load()
	if err != nil || !stored.Access.Equal(cur.Secret) || stored.Refresh.Equal(oldStored.Refresh) {
		t.Fatalf("the stored login is not the rotated one (err %v)", err)
	}
	if st := a.Status(); st.Dead || st.Failing || st.Refreshes != 1 {
		t.Fatalf("status %+v", st)
	}
	// And the stored refresh token is the live one: the next refresh works.
	if err := a.RefreshNow(context.Background(), cur.Secret); err != nil {
		t.Fatalf("a refresh with the stored refresh token: %v", err)
	}
	for _, r := range fs.Requests() {
		if r.Error == fakeoauth.ErrInvalidGrant {
			t.Fatalf("a refresh was refused: %+v", r)
		}
	}
}

// TestConcurrentRefreshesShareOne: requests that meet the same expired
// token while its refresh is in flight wait for that one refresh and share
// its result, failure included: one request at the OAuth server, never one
// per box (before, each waiter tried again in turn after a failure).
func TestConcurrentRefreshesShareOne(t *testing.T) {
	fs, e := server(t)
	a, _ := newAuthority(t, fs, e)
	first, err := a.Current()
	if err != nil {
		t.Fatal(err)
	}
	base := len(fs.Requests())
	// The refresh fails, slowly enough that all ten are waiting for it.
	fs.InjectFault(fakeoauth.FaultStatus, 1, 503, 300*time.Millisecond)
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for range 10 {
		wg.Go(func() { errs <- a.RefreshNow(context.Background(), first.Secret) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		var oe *Error
		if !errors.As(err, &oe) || oe.Status != 503 || IsPermanent(err) {
			t.Errorf("a waiter got %v, want the one refresh's 503", err)
		}
	}
	time.Sleep(50 * time.Millisecond) // a second refresh, if any, is recorded by now
	var refreshes int
	for _, r := range fs.Requests()[base:] {
		if r.Grant == "refresh_token" {
			refreshes++
		}
	}
	if refreshes != 1 {
		t.Fatalf("%d refresh requests at the OAuth server for one expired token, want 1", refreshes)
	}
	// The login is not dead: the next refresh works.
	if err := a.RefreshNow(context.Background(), first.Secret); err != nil {
		t.Fatal(err)
	}
	if st := a.Status(); st.Failing || st.Dead || st.Refreshes != 1 {
		t.Fatalf("status %+v", st)
	}
}

// TestRunStoppingMidRefreshKeepsTheLogin: the Runner stops (Run's context
// ends) while its refresh ahead of expiry is at the server, which has
// rotated and not yet answered. The refresh is finished and stored before
// Run returns, so the next Runner starts with the live refresh token.
func TestRunStoppingMidRefreshKeepsTheLogin(t *testing.T) {
	fs, e := server(t)
	fs.AccessTTL = 10 * time.Second
	a, path := newAuthority(t, fs, e)
	a.Lead = 10 * time.Second // due at once
	old, _ := a.Current()
	fs.InjectFault(fakeoauth.FaultLateAnswer, 1, 0, 300*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	waitFor(t, "the server to rotate the refresh token", func() bool { return fs.Refreshes() == 1 })
	cancel() // the Runner stops
	<-done
	stored, err := (Store{Path: path}).Load()
	if err != nil || stored.Access.Equal(old.Secret) {
		t.Fatalf("the stored login is not the rotated one (err %v)", err)
	}
	// A restarted Runner refreshes with what is stored.
	b := &Authority{Store: Store{Path: path}, Client: a.Client}
	cur, err := b.Current()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.RefreshNow(context.Background(), cur.Secret); err != nil {
		t.Fatalf("the refresh after the restart: %v", err)
	}
}
