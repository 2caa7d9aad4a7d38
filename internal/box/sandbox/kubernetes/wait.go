package kubernetes

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// waitRunning waits until the session's pod runs its guest, at most
// Config.StartTimeout. A pod that cannot come up (no such image on a node
// that may not pull, a bad spec) or that ended fails at once; one that
// stays Pending fails at the timeout. Either error names why, from the
// pod's conditions and container states, its claims and its events.
//
// It watches the pod (from the version it read) rather than polling, so it
// returns as soon as the kubelet reports the container started; a watch
// that ends early (the API server closes watches now and then) is opened
// again after a fresh read.
func (b *Backend) waitRunning(ctx context.Context, session string) error {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.StartTimeout)
	defer cancel()
	pods := b.cs.CoreV1().Pods(b.cfg.Namespace)
	name := boxName(session)
	// check says whether pod settles the wait: nil error and done when it
	// runs, an error when it cannot.
	check := func(pod *corev1.Pod) (bool, error) {
		if running(pod) {
			return true, nil
		}
		if reason, fatal := podTrouble(pod); fatal {
			return true, fmt.Errorf("the pod of session %s cannot run: %s: %w", session, reason, errdefs.ErrUnavailable)
		}
		return false, nil
	}
	var pod *corev1.Pod
	for {
		got, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil && ctx.Err() == nil {
			return mapErr("the box's pod", err)
		}
		if err == nil {
			pod = got
			if done, err := check(pod); done {
				return err
			}
			w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(),
				ResourceVersion: pod.ResourceVersion})
			if err == nil {
				done, err := watchUntil(ctx, w.ResultChan(), check, &pod)
				w.Stop()
				if done {
					return err
				}
				continue // read again: the watch ended, or it is time to
			}
		}
		select {
		case <-ctx.Done():
			why := b.whyPending(context.WithoutCancel(ctx), session, pod)
			return fmt.Errorf("the pod of session %s is not running after %v: %s: %w", session, b.cfg.StartTimeout, why, errdefs.ErrUnavailable)
		case <-time.After(200 * time.Millisecond): // no pod yet, or no watch
		}
	}
}

// resyncEvery bounds how long waitRunning trusts one watch before it reads
// the pod again (a watch that missed an event, as one replayed from a
// version the API server no longer keeps may, costs at most this).
const resyncEvery = 2 * time.Second

// watchUntil follows a pod's watch events until check settles the wait
// (done, with check's error), the watch ends, resyncEvery passes or ctx
// ends (not done). *pod is the latest pod seen.
func watchUntil(ctx context.Context, events <-chan watch.Event, check func(*corev1.Pod) (bool, error), pod **corev1.Pod) (bool, error) {
	resync := time.NewTimer(resyncEvery)
	defer resync.Stop()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return false, nil
			}
			if p, ok := ev.Object.(*corev1.Pod); ok {
				*pod = p
				if done, err := check(p); done {
					return true, err
				}
			}
		case <-resync.C:
			return false, nil
		case <-ctx.Done():
			return false, nil
		}
	}
}

// fatalWaiting are container waiting reasons that no wait will cure.
var fatalWaiting = map[string]bool{
	"ErrImageNeverPull": true, "InvalidImageName": true, "CreateContainerConfigError": true,
	"CreateContainerError": true, "RunContainerError": true, "ImageInspectError": true,
}

// podTrouble says what keeps a pod from running, as far as the pod itself
// tells, and whether it is for good. Pure: table-tested.
func podTrouble(p *corev1.Pod) (reason string, fatal bool) {
	if p == nil {
		return "the pod does not exist", false
	}
	if p.DeletionTimestamp != nil {
		return "the pod is being deleted", true
	}
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			return fmt.Sprintf("its guest ended (exit code %d, %s) %s", t.ExitCode, t.Reason, strings.TrimSpace(t.Message)), true
		}
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" {
			why := w.Reason
			if w.Message != "" {
				why += ": " + w.Message
			}
			if w.Reason == "ErrImageNeverPull" || w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff" {
				why += " (the node must have the box image: push it to a registry the cluster pulls from, or import it into the node's runtime)"
			}
			return why, fatalWaiting[w.Reason]
		}
	}
	switch p.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		return fmt.Sprintf("the pod ended (%s) %s %s", p.Status.Phase, p.Status.Reason, p.Status.Message), true
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return fmt.Sprintf("not scheduled (%s): %s", c.Reason, c.Message), false
		}
	}
	return "", false
}

// whyPending gathers, for an error, what the pod, its claims and its
// events say.
func (b *Backend) whyPending(ctx context.Context, session string, pod *corev1.Pod) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var why []string
	if r, _ := podTrouble(pod); r != "" {
		why = append(why, r)
	}
	for _, name := range []string{homeClaim(session), wsClaim(session)} {
		c, err := b.cs.CoreV1().PersistentVolumeClaims(b.cfg.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil && c.Status.Phase != corev1.ClaimBound {
			why = append(why, fmt.Sprintf("claim %s is %s (does storage class %q bind claims?)", name, c.Status.Phase, b.cfg.StorageClass))
		}
	}
	if pod != nil {
		evs, err := b.cs.CoreV1().Events(b.cfg.Namespace).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
			"involvedObject.kind": "Pod", "involvedObject.name": pod.Name, "involvedObject.uid": string(pod.UID)}.String()})
		if err == nil {
			why = append(why, eventReasons(evs.Items)...)
		}
	}
	if len(why) == 0 {
		return "the cluster says nothing of why"
	}
	return strings.Join(why, "; ")
}

// eventReasons are the distinct warnings among events, newest last.
func eventReasons(evs []corev1.Event) []string {
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].LastTimestamp.Before(&evs[j].LastTimestamp) })
	seen := map[string]bool{}
	var out []string
	for _, e := range evs {
		s := e.Reason + ": " + e.Message
		if e.Type == corev1.EventTypeWarning && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
