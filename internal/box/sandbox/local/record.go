// Records of boxes on disk: boxes/<id>/box.json, one per box.

package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/paddockhq/paddock/internal/base/atomicfile"
	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/cgroup"
	"github.com/paddockhq/paddock/internal/box/sandbox"
)

// record is box.json.
type record struct {
	ID        string            `json:"id"`
	Session   string            `json:"session"`
	Labels    map[string]string `json:"labels"`
	Created   time.Time         `json:"created"`
	UID       int               `json:"uid"`
	Workspace string            `json:"workspace,omitempty"` // host dir, or "" for the volume's
	// WorkspaceReal is Workspace with the symlinks of its path resolved
	// when the box was made (the owner chose them). Each start binds it
	// through a descriptor opened without following any symlink, so one
	// that appears on the path later — another box may write a parent
	// directory — is refused, never followed.
	WorkspaceReal string `json:"workspace_real,omitempty"`
	// UnsafeHostCode: the host's code paths in the workspace stay writable.
	UnsafeHostCode bool `json:"unsafe_host_code,omitempty"`
	// Clone: the box gets Workspace's git directory read-only at
	// sandbox.OriginDir and its own /workspace (sandbox.CreateOptions.Clone).
	Clone bool `json:"clone,omitempty"`
	// WorkspaceUID is the workspace's owner when the box was made; every
	// mount refuses the directory if it belongs to anyone else by then
	// (0 in records from before it was kept: taken at the next mount).
	WorkspaceUID int            `json:"workspace_uid,omitempty"`
	Limits       sandbox.Limits `json:"limits"`
	Claude       string         `json:"claude,omitempty"` // this box's Claude Code binary, if not the backend's
	// Runtime is runtimes.Runsc for a box on gVisor, "" for bwrap's.
	Runtime string        `json:"runtime,omitempty"`
	Notes   []string      `json:"notes,omitempty"`
	Cgroup  *cgroup.Group `json:"cgroup,omitempty"`
	// The running instance, if any: the guest's host pid and its start
	// time (to tell it from a recycled pid).
	PID      int    `json:"pid,omitempty"`
	PIDStart uint64 `json:"pid_start,omitempty"`
}

func (b *Backend) boxDir(id string) string { return filepath.Join(b.cfg.Root, "boxes", id) }

func (b *Backend) volDir(session string) string { return filepath.Join(b.cfg.Root, "volumes", session) }

func validID(id string) bool {
	if !strings.HasPrefix(id, "pdk-") || len(id) != 16 {
		return false
	}
	for _, c := range id[4:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func (b *Backend) load(id string) (*record, error) {
	if !validID(id) {
		return nil, fmt.Errorf("box %q: %w", id, errdefs.ErrNotFound)
	}
	raw, err := os.ReadFile(filepath.Join(b.boxDir(id), "box.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("box %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	var r record
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("box %s: damaged record: %w", id, err)
	}
	return &r, nil
}

func (b *Backend) save(r *record) error {
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	// Not fsynced: after a power loss the box is gone too; what matters is
	// that a crashed Runner never reads a half-written record.
	return atomicfile.WriteNoSync(filepath.Join(b.boxDir(r.ID), "box.json"), raw, 0o600)
}

func (b *Backend) records() ([]*record, error) {
	ents, err := os.ReadDir(filepath.Join(b.cfg.Root, "boxes"))
	if err != nil {
		return nil, err
	}
	var out []*record
	for _, e := range ents {
		if r, err := b.load(e.Name()); err == nil {
			out = append(out, r)
		}
	}
	return out, nil
}

func newID() (string, error) {
	var b [6]byte
	f, err := os.Open("/dev/urandom")
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := io.ReadFull(f, b[:]); err != nil {
		return "", err
	}
	return fmt.Sprintf("pdk-%x", b), nil
}

func (b *Backend) box(r *record) sandbox.Box {
	st := sandbox.StateCreated
	if r.PID != 0 {
		st = sandbox.StateStopped
		if alive(r.PID, r.PIDStart) {
			st = sandbox.StateRunning
		}
	}
	return sandbox.Box{ID: r.ID, Session: r.Session, Backend: Name, State: st, Created: r.Created,
		Volume: b.volDir(r.Session), Limits: r.Limits, Runtime: cmpRuntime(r), Notes: r.Notes}
}
