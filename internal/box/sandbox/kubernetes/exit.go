package kubernetes

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/paddockhq/paddock/internal/box/sandbox"
)

var _ sandbox.Waiter = (*Backend)(nil)

// Wait implements sandbox.Waiter: it blocks until the guest of the box's
// pod has ended, or ctx is done (then it returns ctx.Err(), and leaves
// nothing running behind it). ErrNotFound only for an id that is not a box
// of this paddock (no record); a box without a pod (never started,
// stopped, its pod deleted from outside) or whose pod is not running its
// guest has ended already, and Wait returns at once.
//
// The pod waited for is the one Wait first reads, pinned by its UID: a pod
// of the same name made later (a new Start) means that one ended. It has
// ended when its guest container terminated (Code is the container's exit
// code, OOMKilled its reason "OOMKilled"), when the pod's phase is
// Succeeded or Failed (evicted: Code -1 unless the container says more),
// or when the pod is gone (Code -1: a pod deleted at once, as with
// `kubectl delete --force`, takes its container's end with it). A pod being
// deleted whose guest still runs (its grace period) has not ended yet.
//
// Wait watches the pod from the version it read, as waitRunning does, so it
// costs one open watch per waiting box, not a poll. A watch that ends (the
// API server closes watches after a while, and at once for a version it no
// longer keeps) is opened again after a fresh read. Once the box is found,
// errors of the API server that may pass (no answer, a timeout, too many
// requests) are waited out too; any other error ends the wait with it.
func (b *Backend) Wait(ctx context.Context, id string) (sandbox.ExitStatus, error) {
	_, session, err := b.box(ctx, id)
	if ctx.Err() != nil {
		return sandbox.ExitStatus{}, ctx.Err() // not a wrapped one
	}
	if err != nil {
		return sandbox.ExitStatus{}, err
	}
	pods := b.cs.CoreV1().Pods(b.cfg.Namespace)
	name := boxName(session)
	ended := func(st sandbox.ExitStatus) (sandbox.ExitStatus, error) {
		st.At = time.Now().UTC()
		return st, nil
	}
	gone := sandbox.ExitStatus{Code: -1}
	var uid types.UID // the pod waited for, once read
	var pause time.Duration
	for {
		if pause > 0 {
			select {
			case <-ctx.Done():
				return sandbox.ExitStatus{}, ctx.Err()
			case <-time.After(pause):
			}
		}
		pod, err := pods.Get(ctx, name, metav1.GetOptions{})
		switch {
		case ctx.Err() != nil:
			return sandbox.ExitStatus{}, ctx.Err()
		case apierrors.IsNotFound(err):
			return ended(gone)
		case err != nil && transient(err):
			pause = nextPause(pause)
			continue
		case err != nil:
			return sandbox.ExitStatus{}, mapErr("box "+id, err)
		}
		if uid == "" {
			uid = pod.UID
		} else if pod.UID != uid {
			return ended(gone) // deleted and made again meanwhile
		}
		if st, done := podExit(pod); done {
			return ended(st)
		}
		secs := int64(watchFor / time.Second)
		opened := time.Now()
		w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(),
			ResourceVersion: pod.ResourceVersion, TimeoutSeconds: &secs})
		switch {
		case ctx.Err() != nil:
			return sandbox.ExitStatus{}, ctx.Err()
		case err != nil && !transient(err):
			return sandbox.ExitStatus{}, mapErr("watch box "+id, err)
		case err == nil:
			st, done := followExit(ctx, w.ResultChan(), name, uid)
			w.Stop() // ends the watch's own goroutine and its request
			if ctx.Err() != nil {
				return sandbox.ExitStatus{}, ctx.Err()
			}
			if done {
				return ended(st)
			}
		}
		// A watch refused, or ended at once (an error event), is opened
		// again after a growing pause, not in a tight loop; one that
		// lasted is opened again at once.
		if err != nil || time.Since(opened) < time.Second {
			pause = nextPause(pause)
		} else {
			pause = 0
		}
	}
}

// watchFor bounds each watch of Wait on the API server's side: a watch
// that silently stopped delivering (a lost connection the client has not
// noticed yet) costs at most this before the pod is read again.
const watchFor = 5 * time.Minute

// followExit follows the watch events of pod name (whose UID is uid) until
// its guest ended (done, and how), the watch ends (an error event ends it
// too: the caller reads the pod again) or ctx is done (not done).
func followExit(ctx context.Context, events <-chan watch.Event, name string, uid types.UID) (sandbox.ExitStatus, bool) {
	for {
		select {
		case <-ctx.Done():
			return sandbox.ExitStatus{}, false
		case ev, ok := <-events:
			if !ok {
				return sandbox.ExitStatus{}, false
			}
			p, isPod := ev.Object.(*corev1.Pod)
			switch {
			case ev.Type == watch.Error:
				return sandbox.ExitStatus{}, false // e.g. 410 Gone: too old a version
			case !isPod || p.Name != name:
				continue // a bookmark, or not the box's pod
			case p.UID != uid:
				return sandbox.ExitStatus{Code: -1}, true // a later pod of the name
			}
			st, done := podExit(p)
			if ev.Type == watch.Deleted {
				// Gone: its last state says how its guest ended, if it
				// got to say (not after a deletion with no grace).
				if !done {
					st = sandbox.ExitStatus{Code: -1}
				}
				return st, true
			}
			if done {
				return st, true
			}
		}
	}
}

// podExit says whether a pod's guest has ended, and how (At unset). With
// RestartPolicy Never a guest that stopped running never runs again in the
// pod, so a guest that does not run (yet, or any more) has ended: this is
// Inspect's "not running". Pure: table-tested.
func podExit(p *corev1.Pod) (sandbox.ExitStatus, bool) {
	phaseEnded := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != containerName {
			continue
		}
		if t := cs.State.Terminated; t != nil {
			return sandbox.ExitStatus{Code: int(t.ExitCode), OOMKilled: t.Reason == "OOMKilled"}, true
		}
		if cs.State.Running != nil && !phaseEnded {
			// Running, even in a pod being deleted: the guest may still
			// be in its grace period.
			return sandbox.ExitStatus{}, false
		}
	}
	return sandbox.ExitStatus{Code: -1}, true
}

// transient: an API error that may pass if waited out (no answer at all,
// the server busy or timing out), as opposed to one that will not
// (forbidden, invalid).
func transient(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true
	}
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err)
}

// nextPause doubles the pause before Wait's next read, from 100ms to 5s.
func nextPause(d time.Duration) time.Duration {
	return min(max(2*d, 100*time.Millisecond), 5*time.Second)
}
