package runner

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sort"
	"time"

	"github.com/paddockhq/paddock/internal/base/store"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/sessions/session"
)

// Sessions lists every session record, newest first.
func (r *Runner) Sessions(context.Context) ([]session.Session, error) {
	kvs, err := r.store.List(store.BucketSessions)
	if err != nil {
		return nil, err
	}
	out := make([]session.Session, 0, len(kvs))
	for _, kv := range kvs {
		var s session.Session
		if json.Unmarshal(kv.Value, &s) == nil {
			r.fillOwner(&s)
			if sl := r.slot(s.ID); sl != nil {
				sl.mu.Lock()
				sl.owner, sl.ownerKnown = s.Owner, true
				s.Ending = sl.ending
				sl.mu.Unlock()
			}
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.After(out[j].Created) })
	r.overlayActivity(out)
	return out, nil
}

func (r *Runner) save(s *session.Session) error {
	s.Updated = time.Now().UTC()
	s.YourRole = "" // per caller, never stored
	s.Ending = ""   // while an operation runs, never stored
	r.fillOwner(s)
	if sl := r.slot(s.ID); sl != nil {
		sl.mu.Lock()
		sl.owner, sl.ownerKnown = s.Owner, true
		sl.mu.Unlock()
	}
	r.stampActivity(s) // the activity in memory is the current one
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if err := r.store.Put(store.BucketSessions, s.ID, b); err != nil {
		return err
	}
	r.events.StateChanged(s.ID, s.Name, string(s.Observed))
	return nil
}

// Session resolves a name or id prefix.
func (r *Runner) Session(ctx context.Context, ref string) (session.Session, error) {
	all, err := r.Sessions(ctx)
	if err != nil {
		return session.Session{}, err
	}
	return session.Resolve(all, ref)
}

// sessionCredFile is where a session's own credential is kept (0600).
func (r *Runner) sessionCredFile(id string) credential.File {
	return credential.File{Path: filepath.Join(r.opts.StateDir, "session-credentials", id+".json")}
}

// relaySecretFile is where a session's secret for a relay is kept (0600).
func (r *Runner) relaySecretFile(id, relay string) credential.File {
	return credential.File{Path: filepath.Join(r.opts.StateDir, "session-credentials", id+".relay-"+relay+".json")}
}

// credentialOf is the credential a session's requests go out with: its
// own, if its creator gave one, else its owner's (credentialOfPerson).
func (r *Runner) credentialOf(id string) (credential.Credential, error) {
	owner := r.ownerOf(id)
	// Most sessions have no credential of their own: that is remembered,
	// not looked for on every request (the file is written only when the
	// session is made, before its first request).
	sl := r.slot(id)
	none := false
	if sl != nil {
		sl.mu.Lock()
		none = sl.noOwnCred
		sl.mu.Unlock()
	}
	if !none {
		c, err := r.sessionCredFile(id).Load()
		if err == nil {
			c.Source, c.User = "session", owner.Name
			return c, nil
		}
		if !errors.Is(err, credential.ErrMissing) {
			return credential.Credential{}, err
		}
		if sl != nil {
			sl.mu.Lock()
			sl.noOwnCred = true
			sl.mu.Unlock()
		}
	}
	return r.credentialOfPerson(owner)
}
