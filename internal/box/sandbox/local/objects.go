// The objects a backend lists and prunes: box records, volumes, and the
// processes of its uids.

package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/sandbox"
)

// List implements sandbox.Backend: box records, volume directories, and any
// process running as a box uid (what a stuck teardown would leave).
func (b *Backend) List(ctx context.Context) ([]sandbox.Object, error) {
	recs, err := b.records()
	if err != nil {
		return nil, err
	}
	var out []sandbox.Object
	uidSession := map[int]string{}
	for _, r := range recs {
		out = append(out, sandbox.Object{Kind: sandbox.KindBox, ID: r.ID, Session: r.Session, Labels: r.Labels})
		uidSession[r.UID] = r.Session
	}
	vols, _ := os.ReadDir(filepath.Join(b.cfg.Root, "volumes"))
	for _, v := range vols {
		var lab map[string]string
		raw, err := os.ReadFile(filepath.Join(b.cfg.Root, "volumes", v.Name(), "labels.json"))
		if err != nil || json.Unmarshal(raw, &lab) != nil || lab[sandbox.LabelManaged] != "1" {
			continue
		}
		out = append(out, sandbox.Object{Kind: sandbox.KindVolume, ID: v.Name(), Session: lab[sandbox.LabelSession], Labels: lab})
	}
	// Processes: only those of uids this backend gave out (live boxes, and
	// removed boxes until none of their processes is left).
	b.rmu.Lock()
	defer b.rmu.Unlock()
	retired := b.retired()
	for _, u := range retired {
		uidSession[u] = ""
	}
	seen := map[int]bool{}
	for pid, uid := range hostProcs(b.cfg.UIDBase) {
		session, ours := uidSession[uid]
		if !ours {
			continue
		}
		seen[uid] = true
		out = append(out, sandbox.Object{Kind: sandbox.KindProcess, ID: strconv.Itoa(pid), Session: session,
			Labels: map[string]string{sandbox.LabelManaged: "1", "uid": strconv.Itoa(uid)}})
	}
	var keep []int
	for _, u := range retired {
		if seen[u] {
			keep = append(keep, u)
		}
	}
	if len(keep) != len(retired) {
		b.setRetired(keep)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Kind+sandbox.ObjectKind(out[i].ID) < out[j].Kind+sandbox.ObjectKind(out[j].ID)
	})
	return out, nil
}

// RemoveObject implements sandbox.Backend.
func (b *Backend) RemoveObject(ctx context.Context, o sandbox.Object) error {
	switch o.Kind {
	case sandbox.KindBox:
		return b.Remove(ctx, o.ID, sandbox.RemoveOptions{KeepVolume: true})
	case sandbox.KindVolume:
		if err := sandbox.ValidSession(o.ID); err != nil {
			return err
		}
		return os.RemoveAll(b.volDir(o.ID))
	case sandbox.KindProcess:
		pid, err := strconv.Atoi(o.ID)
		if err != nil {
			return fmt.Errorf("process %q: %w", o.ID, errdefs.ErrInvalid)
		}
		err = syscall.Kill(pid, syscall.SIGKILL)
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		return err
	}
	return fmt.Errorf("object kind %q: %w", o.Kind, errdefs.ErrInvalid)
}
